# SPDX-License-Identifier: Apache-2.0
# The nvcc-built GEMM tile kernels (sm_90a and sm_80) and their launcher, as a
# static library `tdist_gemm_cuda` linked by the GEMM tests, the GEMM benchmark
# and the tdist CLI (`tdist tune gemm`). The JIT compiles gemm_sm90.cuh /
# gemm_sm80.cuh itself and needs none of this. Included by each folder that
# links it; the first include defines the target. Needs the CUDA backend.
if(TD_HAVE_CUDA AND NOT TARGET tdist_gemm_cuda)
  set(TD_GEMM_DIR ${CMAKE_SOURCE_DIR}/src/tile/cuda)
  add_library(tdist_gemm_cuda STATIC
    ${TD_GEMM_DIR}/gemm_sm90_launch.cu
    ${TD_GEMM_DIR}/gemm_sm90_kernels_nk.cu
    ${TD_GEMM_DIR}/gemm_sm90_kernels_kn.cu
    ${TD_GEMM_DIR}/gemm_sm80.cu
    ${TD_GEMM_DIR}/gemm_sm90_tune.c
    ${TD_GEMM_DIR}/gemm_cublas.c)
  set_target_properties(tdist_gemm_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON)
  target_include_directories(tdist_gemm_cuda PUBLIC ${TD_GEMM_DIR} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(tdist_gemm_cuda PUBLIC tdist CUDA::cudart CUDA::cublas PkgConfig::CJSON)
  target_compile_options(tdist_gemm_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills>)
endif()
