// Marks functions usable from both host code and CUDA device code, so the arithmetic that must agree bit for bit
// between the CPU and the GPU (quantization, Lorenzo, code mapping) exists once.
#pragma once
#if defined(__CUDACC__)
#define ZB_HD __host__ __device__ __forceinline__
#else
#define ZB_HD inline
#endif
