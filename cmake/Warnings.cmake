# kloop_warnings: -Wall -Wextra -Werror for kloop's own C++ (not for CUDA device code or system
# headers). kloop_sanitize: ASan+UBSan when KLOOP_SANITIZE is on.
add_library(kloop_warnings INTERFACE)
target_compile_options(kloop_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wno-missing-field-initializers>)
if(KLOOP_SANITIZE)
  target_compile_options(kloop_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>
    # GCC 12 reports false -Wmaybe-uninitialized inside libstdc++'s std::function (as used by
    # std::regex) when ASan instruments it; the normal build keeps the warning as an error.
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized>)
  target_link_options(kloop_warnings INTERFACE -fsanitize=address,undefined)
endif()
# KLOOP_FUZZ: libFuzzer's coverage instrumentation on all of kloop's code (the fuzz targets link
# -fsanitize=fuzzer themselves, fuzz/CMakeLists.txt); clang only.
if(KLOOP_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KLOOP_FUZZ needs clang (CXX=clang++-14; scripts/fuzz.sh sets it)")
  endif()
  target_compile_options(kloop_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()
