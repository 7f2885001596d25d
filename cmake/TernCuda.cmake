# CUDA is optional: built whenever nvcc exists, for sm_90a (H100/H200, the GPU we test on: the
# 'a' target exposes wgmma, and its code runs on compute capability 9.0 only) and
# sm_120a/sm_121a (RTX 50xx / DGX Spark GB10: the 'a' targets expose the FP4 mma.sync).
# TERN_SM90A is defined when the list has sm_90a code: the launchers then offer the wgmma
# paths on a 9.0 device (attn_prefill_wgmma_ok).
set(TERN_HAVE_CUDA OFF)
if(TERN_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a-real 120a-real 121a-real)
    endif()
    if(CMAKE_CUDA_ARCHITECTURES MATCHES "(^|;)90a")
      add_compile_definitions(TERN_SM90A=1)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    find_package(CUDAToolkit REQUIRED)
    set(TERN_HAVE_CUDA ON)
    message(STATUS "tern: CUDA kernels enabled (${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "tern: nvcc not found: building the CPU-only worker")
  endif()
endif()
