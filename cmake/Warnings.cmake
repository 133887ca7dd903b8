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
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  target_link_options(kloop_warnings INTERFACE -fsanitize=address,undefined)
endif()
