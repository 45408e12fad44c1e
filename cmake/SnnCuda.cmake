# Resolves SNN_WITH_CUDA (AUTO|ON|OFF) into SNN_CUDA_ENABLED.
#
# AUTO turns CUDA on when nvcc is found and LibTorch was built with CUDA
# (its c10_cuda target exists). The kernels never include LibTorch headers,
# so nvcc only compiles small files.

include(CheckLanguage)

set(_snn_torch_cuda FALSE)
if(TARGET c10_cuda OR TARGET torch::cudart OR TORCH_CUDA_LIBRARIES)
  set(_snn_torch_cuda TRUE)
endif()

string(TOUPPER "${SNN_WITH_CUDA}" _snn_cuda_mode)
set(SNN_CUDA_ENABLED OFF)
if(_snn_cuda_mode STREQUAL "OFF")
  set(SNN_CUDA_ENABLED OFF)
elseif(_snn_cuda_mode STREQUAL "ON" OR _snn_cuda_mode STREQUAL "AUTO")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER AND _snn_torch_cuda)
    set(SNN_CUDA_ENABLED ON)
  elseif(_snn_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "SNN_WITH_CUDA=ON but "
      "$<IF:${_snn_torch_cuda},,LibTorch was built without CUDA> nvcc: '${CMAKE_CUDA_COMPILER}', "
      "LibTorch with CUDA: ${_snn_torch_cuda}")
  else()
    message(STATUS "SNN_WITH_CUDA=AUTO: CUDA off (nvcc: '${CMAKE_CUDA_COMPILER}', LibTorch with CUDA: ${_snn_torch_cuda})")
  endif()
else()
  message(FATAL_ERROR "SNN_WITH_CUDA must be AUTO, ON or OFF, got '${SNN_WITH_CUDA}'")
endif()

if(SNN_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # A100 and H100/H200 native code; newer GPUs JIT from the sm_90 PTX.
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  set(SNN_CUDA_ENABLED_01 1)
else()
  set(SNN_CUDA_ENABLED_01 0)
endif()
