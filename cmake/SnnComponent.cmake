# snn_add_component(NAME SOURCES ... [CUDA_SOURCES ...] [DEPENDS ...])
#
# One library per component folder: target snn_NAME, alias snn::NAME, public
# headers in NAME/include/snn/NAME, exported for find_package(snn). CUDA
# sources are compiled only when SNN_CUDA_ENABLED, with --fmad=false so that
# device arithmetic rounds like the host's (the CPU tests check it).
function(snn_add_component name)
  cmake_parse_arguments(ARG "" "" "SOURCES;ISA_SOURCES;CUDA_SOURCES;DEPENDS;PRIVATE_DEPENDS" ${ARGN})
  set(target snn_${name})
  add_library(${target} ${ARG_SOURCES})
  add_library(snn::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME snn_${name})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC snn::core ${ARG_DEPENDS} PRIVATE ${ARG_PRIVATE_DEPENDS})
  # -fno-trapping-math and -fno-math-errno (as LibTorch itself is built) let
  # GCC if-convert and vectorise the kernels' selects; unlike -ffast-math
  # they change no result.
  # -fopenmp: at::parallel_for's threads (see SnnDependencies.cmake).
  target_compile_options(${target} PRIVATE -Wall -Wextra -fopenmp -fno-trapping-math -fno-math-errno)
  target_link_libraries(${target} PRIVATE ${SNN_OPENMP_LIBRARY})
  if(ARG_ISA_SOURCES)
    # Hot CPU loops compiled once per instruction set, each into namespace
    # SNN_ISA, for the caller to pick at run time (snn/core/cpu_isa.h):
    # fast on AVX2 and AVX-512 machines, still correct on any x86-64.
    # -ffp-contract=off: AVX-512F has FMA instructions, and GCC would fuse
    # a * b + c into one rounding there but not in the other builds.
    # 512-bit vectors are asked for: GCC's generic tuning prefers 256.
    # These objects must define no inline function outside their SNN_ISA
    # namespace (std::vector's members, say): the linker keeps one copy of
    # each for the whole library, and an AVX-512 copy would then run on a
    # CPU without it (tests/build/isa_symbols_test.sh checks).
    foreach(isa base avx2 avx512)
      add_library(${target}_${isa} OBJECT ${ARG_ISA_SOURCES})
      target_include_directories(${target}_${isa} PRIVATE
        ${CMAKE_CURRENT_SOURCE_DIR}/include $<TARGET_PROPERTY:snn_core,INTERFACE_INCLUDE_DIRECTORIES>)
      target_compile_definitions(${target}_${isa} PRIVATE SNN_ISA=${isa})
      target_compile_options(${target}_${isa} PRIVATE -Wall -Wextra -fopenmp-simd -fno-trapping-math -fno-math-errno
        -ffp-contract=off
        $<$<STREQUAL:${isa},avx2>:-mavx2>
        $<$<STREQUAL:${isa},avx512>:-mavx512f -mavx512bw -mavx512vl -mavx512dq -mprefer-vector-width=512>)
      target_sources(${target} PRIVATE $<TARGET_OBJECTS:${target}_${isa}>)
      set_property(GLOBAL APPEND PROPERTY SNN_ISA_OBJECT_TARGETS ${target}_${isa})
    endforeach()
  endif()
  if(SNN_CUDA_ENABLED AND ARG_CUDA_SOURCES)
    # The kernels are an object library of their own that sees only CUDA and
    # our torch-free headers: LibTorch's targets carry nvcc flags (its own
    # architecture list) that must not reach them, and nvcc stays fast.
    add_library(${target}_cuda OBJECT ${ARG_CUDA_SOURCES})
    target_include_directories(${target}_cuda PRIVATE
      ${CMAKE_CURRENT_SOURCE_DIR}/include $<TARGET_PROPERTY:snn_core,INTERFACE_INCLUDE_DIRECTORIES>)
    target_compile_options(${target}_cuda PRIVATE --fmad=false)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${target}_cuda>)
    target_link_libraries(${target} PRIVATE CUDA::cudart)
  endif()
  install(TARGETS ${target} EXPORT snnTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/snn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()
