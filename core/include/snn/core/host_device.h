#pragma once
/// SNN_HOST_DEVICE marks the small inline functions that hold the physics of
/// one neuron-step or one random draw. nvcc compiles them for host and device;
/// g++ sees plain inline functions. The CPU tests therefore check the very
/// arithmetic the CUDA kernels run.

#if defined(__CUDACC__)
#define SNN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SNN_HOST_DEVICE inline
#endif
