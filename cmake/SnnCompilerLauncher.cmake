# Use ccache when it is installed: LibTorch headers are slow to compile and
# the test command rebuilds several configurations.
find_program(SNN_CCACHE ccache)
if(SNN_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  # Compile commands name paths relative to the source tree (CCACHE_BASEDIR)
  # and debug builds do not hash the working directory, so build trees of
  # any name and clones at any path share one cache; set here rather than
  # in scripts/build.sh so that a plain `ninja -C DIR` does the same.
  set(_snn_ccache ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1 ${SNN_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_snn_ccache})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${_snn_ccache})
endif()
