// Programmatic dependent launch (compute capability 9.0 and up): a kernel queued with launch_dependent may be
// scheduled before the kernel ahead of it in the stream (or graph) has finished, so that its launch overlaps that
// kernel's tail instead of following it. A chunk-sized call is a chain of short kernels, each of which otherwise pays
// the gap between one grid's end and the next grid's start (about 1.25 us a node in a graph: bench/NOTES.md 122).
//
// The rule that keeps this correct: every kernel launched with launch_dependent calls wait_for_prior_grids() first,
// before it reads or writes any memory. That call returns once every grid this one depends on has completed and its
// writes are visible (it is a no-op for a kernel launched without the attribute), so the kernel sees what a plain
// launch would see. Because each such kernel waits before it does anything, and before it lets its own dependents
// start (launch_dependents below), a kernel's completion still implies that of all the kernels before it: a kernel two
// steps later may read what the first one wrote.
//
// ZBOUND_GPU_PDL=0 in the environment (read once per process) queues them as plain launches, for comparisons.
#pragma once
#include <cuda_runtime.h>
#include <utility>
#include "gpu_internal.h"

namespace zb {
namespace gpu {

// First statement of a kernel that launch_dependent queues: waits for the grids before it, then lets the grid after
// it be scheduled (its blocks take free SM slots and wait in their own first statement).
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether the current device takes dependent launches (compute capability >= 9.0) and ZBOUND_GPU_PDL is not 0.
bool dependent_launches();

// kernel<<<grid, block, smem, s>>>(args...) as a dependent launch where dependent_launches(), else a plain launch;
// `what` names it in errors (as ZB_LAUNCHED). The kernel must begin with wait_for_prior_grids().
template <typename... Params, typename... Args>
void launch_dependent(const char *what, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                      Args &&...args) {
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = &attr;
    cfg.numAttrs = dependent_launches() ? 1 : 0;
    launched(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), what);
}

}  // namespace gpu
}  // namespace zb
