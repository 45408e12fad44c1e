# The run-time search path of what `cmake --install` puts in bin/ and lib/.
#
# CMake gives build-tree binaries an RPATH naming every linked library's
# folder, but strips it on install: an installed bin/snnsim then fails with
# "libtorch.so: cannot open shared object file", since the wheel's LibTorch
# is in no folder the loader searches. The install RPATH names
#   - LibTorch's library folder, taken from the Torch package that was found
#     (the torch wheel's torch/lib in the .venv of the build, or an archive's
#     lib/), as an absolute path with symlinks resolved: an installed tree
#     keeps working wherever it is moved, as long as that LibTorch stays
#     (docs/BUILDING.md, "Relocating");
#   - $ORIGIN/<bin to lib>, our own libraries when they are shared
#     (-DBUILD_SHARED_LIBS=ON); from lib/ itself that path leads back to lib/.
# The other shared libraries (HDF5, PLplot, zlib, libstdc++) are the
# system's, which the loader finds without help.
# Included before the targets are made: CMAKE_INSTALL_RPATH initialises each
# target's INSTALL_RPATH.
get_filename_component(SNN_TORCH_LIBRARY_DIR "${TORCH_INSTALL_PREFIX}/lib" REALPATH)
if(NOT EXISTS "${SNN_TORCH_LIBRARY_DIR}/libtorch.so")
  message(WARNING "LibTorch's library folder ${SNN_TORCH_LIBRARY_DIR} (from TORCH_INSTALL_PREFIX "
                  "${TORCH_INSTALL_PREFIX}) has no libtorch.so: the installed snnsim may not find LibTorch")
endif()
file(RELATIVE_PATH _snn_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set(CMAKE_INSTALL_RPATH "\$ORIGIN/${_snn_bin_to_lib}" "${SNN_TORCH_LIBRARY_DIR}")
