# Every dependency comes from a Debian 12 package or the CUDA 13.0 toolkit; nothing is downloaded.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
find_package(Threads REQUIRED)
find_path(HTTPLIB_INCLUDE_DIR httplib.h REQUIRED)
find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h REQUIRED)

# CUDA toolkit: NVRTC for the build worker, cudart_static for the GPU worker, CUPTI headers.
# No target links libcuda (ARCHITECTURE.md; ../shared/docs/DEVICE.md).
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit 13.0 REQUIRED)

if(KLOOP_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS ${CUDAToolkit_BIN_DIR}/nvcc)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_BIN_DIR}/nvcc)
  endif()
  set(CMAKE_CUDA_ARCHITECTURES 90)
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
endif()

# NVRTC by path: without the CUDA language, FindCUDAToolkit's CUDA::nvrtc carries the libcuda
# stub as a link dependency, and no binary that runs on the build machine may link libcuda.
find_library(KLOOP_NVRTC_LIBRARY nvrtc PATHS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64
             NO_DEFAULT_PATH REQUIRED)
add_library(kloop_nvrtc INTERFACE)
target_link_libraries(kloop_nvrtc INTERFACE ${KLOOP_NVRTC_LIBRARY})
target_include_directories(kloop_nvrtc INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
