# SPDX-License-Identifier: Apache-2.0
# Finds what tdist builds against: threads, OpenBLAS (CPU GEMM tiles and references),
# cmocka (unit tests), cJSON (traces, bench JSON), Open MPI (benchmark baseline),
# and, when present, the CUDA toolkit with NVRTC and NCCL.
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(CMOCKA IMPORTED_TARGET cmocka)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
find_package(MPI COMPONENTS C QUIET)

set(TD_HAVE_CUDA OFF)
if(NOT TD_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Before enable_language, which would otherwise cache nvcc's own default (sm_75).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      set(CMAKE_CUDA_ARCHITECTURES 80 90a CACHE STRING "CUDA architectures to build (sm_80 and sm_90a by default)")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TD_HAVE_CUDA ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      set(CMAKE_CUDA_ARCHITECTURES 80 90a)
    endif()
    # NCCL: in the CUDA toolkit's folders (CI) or inside PyTorch's nvidia/nccl wheel (GPU machine).
    find_path(TD_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV TD_NCCL_HOME PATH_SUFFIXES include)
    find_library(TD_NCCL_LIB NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ENV TD_NCCL_HOME PATH_SUFFIXES lib lib64)
  elseif(TD_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TD_WITH_CUDA=ON but no nvcc was found")
  endif()
endif()
message(STATUS "tdist: CUDA backend ${TD_HAVE_CUDA}, NCCL ${TD_NCCL_LIB}, MPI ${MPI_C_FOUND}")
