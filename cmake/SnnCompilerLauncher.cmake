# Use ccache when it is installed: LibTorch headers are slow to compile and
# the test command rebuilds several configurations.
find_program(SNN_CCACHE ccache)
if(SNN_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${SNN_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${SNN_CCACHE})
endif()
