/* pdl.cuh: programmatic dependent launch (sm_90+). A kernel launched with kcuda_launch_pdl may
 * start while the kernel before it in the stream is still running (its blocks are placed once
 * every block of that kernel has called kcuda_pdl_enter or exited), so a decode step's ~400
 * short kernels overlap their launch and their first weight loads with the previous kernel's
 * tail. The rule every such kernel keeps: before kcuda_pdl_enter it may read only data that no
 * kernel of the step writes (weights, its own arguments) and write nothing; kcuda_pdl_enter waits
 * until the previous grid has completed and its writes are visible. One exception, by name: a
 * kernel may read before its enter what the kernel two launches back wrote, when the kernel
 * between them is a kcuda_pdl_enter kernel whose every block calls it (or a plain launch): a
 * grid is placed only once the one before has passed its enter, which returned only after the
 * one before that had completed. The stream kernel's COMBINE launch (routed experts' down) reads
 * the router's expert ids that way, past the gate_up launch between them (nvfp4_stream.cuh). In a
 * CUDA graph captured from such launches the edges are programmatic (gpu_graph.c can turn them back
 * into full ones). Without the launch attribute, or below sm_90, kcuda_pdl_enter does nothing. The
 * CUDA emulator (dev/cuda/emu/gen_inc.py) runs the launches as plain ones. */
#pragma once

#include <cuda_runtime.h>

/* Wait for the previous grid (completed, writes visible), then let the next grid be placed.
 * Every thread of every block calls it before its first dependent read or any global write. */
static __device__ __forceinline__ void kcuda_pdl_enter()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* Let the next grid be placed, then wait for the previous one: for a short kernel whose successor's
 * work before its enter is long (weights it loads), so that the successor's blocks are placed
 * while the kernel before this one still runs. The successor then may pass its own enter only
 * once this grid completed, as with kcuda_pdl_enter, but its blocks may run their code before
 * enter while the grid before this one has not completed: the two-launches-back exception above
 * does not hold across a kernel that calls this. */
static __device__ __forceinline__ void kcuda_pdl_enter_early()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* kern<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization allowed:
 * kern must call kcuda_pdl_enter as above. Returns the launch's error (also left for
 * cudaGetLastError, as a <<<>>> launch leaves it). */
template <typename... KArgs, typename... Args>
static inline cudaError_t kcuda_launch_pdl(void (*kern)(KArgs...), dim3 grid, dim3 block,
                                           size_t smem, cudaStream_t stream, Args... args)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kern, args...);
}
