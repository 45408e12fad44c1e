# Finds LibTorch and the Debian-packaged libraries.
#
# LibTorch comes either from -DCMAKE_PREFIX_PATH (an official LibTorch
# archive) or, when that does not provide it, from the PyPI torch wheel in the
# project's virtual environment (.venv, made by scripts/setup.sh), whose
# CMake config lives at torch.utils.cmake_prefix_path.

set(SNN_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python interpreter whose torch package provides LibTorch when CMAKE_PREFIX_PATH does not")

# LibTorch's CUDA config otherwise probes for a GPU and, finding none, picks
# a list that includes architectures nvcc 13 no longer supports.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()

find_package(Torch QUIET CONFIG)
if(NOT Torch_FOUND)
  if(NOT EXISTS "${SNN_PYTHON}")
    message(FATAL_ERROR "LibTorch not found: pass -DCMAKE_PREFIX_PATH=/path/to/libtorch, "
                        "or run scripts/setup.sh to make the virtual environment ${SNN_PYTHON}")
  endif()
  execute_process(
    COMMAND "${SNN_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _snn_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _snn_rc ERROR_VARIABLE _snn_err)
  if(NOT _snn_rc EQUAL 0)
    message(FATAL_ERROR "LibTorch not found: '${SNN_PYTHON}' cannot import torch: ${_snn_err}")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_snn_torch_prefix}")
  # Torch's config looks for the CUDA toolkit; where there is none it warns and
  # carries on with a CPU-only LibTorch view, which is what we want then.
  find_package(Torch REQUIRED CONFIG)
endif()
get_filename_component(TORCH_INSTALL_PREFIX "${TORCH_INSTALL_PREFIX}" ABSOLUTE)

# TORCH_LIBRARIES carries -D_GLIBCXX_USE_CXX11_ABI via TORCH_CXX_FLAGS; apply it
# to every target so that std::string crosses the LibTorch boundary safely.
separate_arguments(_snn_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_snn_torch_flags}>")

find_package(Threads REQUIRED)
# at::parallel_for is an inline template that splits work with
# `#pragma omp parallel` (the wheel's LibTorch is built with OpenMP): code
# that calls it must be compiled with -fopenmp, or it silently runs on one
# thread. It must also use the OpenMP runtime LibTorch loaded, the wheel's
# own libgomp, not a second copy.
find_package(OpenMP COMPONENTS CXX)
if(EXISTS "${TORCH_INSTALL_PREFIX}/lib/libgomp.so.1")
  set(SNN_OPENMP_LIBRARY "${TORCH_INSTALL_PREFIX}/lib/libgomp.so.1")
elseif(OpenMP_CXX_FOUND)
  set(SNN_OPENMP_LIBRARY OpenMP::OpenMP_CXX)
else()
  message(FATAL_ERROR "no OpenMP runtime: LibTorch's at::parallel_for needs one (Debian: g++ brings libgomp)")
endif()
# fmt is used header-only (fmt::fmt-header-only): the torch wheel ships its
# own, newer fmt headers on the include path of every target that links
# LibTorch, and linking Debian's libfmt against those headers would mix ABIs.
find_package(fmt REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(ZLIB REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C)
# A static libhdf5 (HDF5_USE_STATIC_LIBRARIES=ON, as scripts/gpu-check.sh
# links Debian's unpacked archive so that no HDF5 is needed at run time)
# also needs its filters' libraries, which FindHDF5 does not name when it
# finds HDF5 without the h5cc wrapper: szip (libaec) and zlib.
# The archive becomes an imported static library that depends on them, so
# that CMake puts them after it on every link line.
if(HDF5_USE_STATIC_LIBRARIES)
  find_library(SNN_SZIP_LIBRARY NAMES libsz.a sz REQUIRED)
  find_library(SNN_AEC_LIBRARY NAMES libaec.a aec REQUIRED)
  list(GET HDF5_C_LIBRARIES 0 _snn_hdf5_archive)
  add_library(snn_hdf5_static STATIC IMPORTED)
  set_target_properties(snn_hdf5_static PROPERTIES
    IMPORTED_LOCATION "${_snn_hdf5_archive}"
    INTERFACE_LINK_LIBRARIES "${SNN_SZIP_LIBRARY};${SNN_AEC_LIBRARY};ZLIB::ZLIB;${CMAKE_DL_LIBS};m")
  set_property(TARGET HDF5::HDF5 PROPERTY INTERFACE_LINK_LIBRARIES snn_hdf5_static)
endif()
