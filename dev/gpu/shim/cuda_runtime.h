/* CPU stand-in for the few CUDA runtime calls the GPU model runner makes, so that the runner's
 * orchestration (layouts, padding, slots, block tables) can be checked on a machine without a
 * GPU with the kernel references behind the *_cuda names (kshim.c). Scratch, not shipped. */
#ifndef SHIM_CUDA_RUNTIME_H
#define SHIM_CUDA_RUNTIME_H
#include <stddef.h>
typedef struct CUstream_st *cudaStream_t;
typedef int cudaError_t;
#define cudaSuccess 0
#define cudaStreamNonBlocking 1
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice };
struct cudaDeviceProp { int major, minor, multiProcessorCount; char name[256]; };
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                              enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemset(void *d, int v, size_t n);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned f);
cudaError_t cudaStreamSynchronize(cudaStream_t st);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamDestroy(cudaStream_t st);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
#define cudaStreamCaptureModeThreadLocal 1
cudaError_t cudaStreamBeginCapture(cudaStream_t st, int mode);
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long f);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t st);
typedef struct CUgraphNode_st *cudaGraphNode_t;
enum cudaGraphNodeType { cudaGraphNodeTypeKernel = 0, cudaGraphNodeTypeMemcpy, cudaGraphNodeTypeMemset };
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *t);
enum cudaGraphDependencyType { cudaGraphDependencyTypeDefault = 0, cudaGraphDependencyTypeProgrammatic = 1 };
#define cudaGraphKernelNodePortDefault 0
typedef struct { unsigned char from_port, to_port, type, reserved[5]; } cudaGraphEdgeData;
cudaError_t cudaGraphGetEdges(cudaGraph_t g, cudaGraphNode_t *from, cudaGraphNode_t *to,
                              cudaGraphEdgeData *d, size_t *n);
cudaError_t cudaGraphRemoveDependencies(cudaGraph_t g, const cudaGraphNode_t *from,
                                        const cudaGraphNode_t *to, const cudaGraphEdgeData *d,
                                        size_t n);
cudaError_t cudaGraphAddDependencies(cudaGraph_t g, const cudaGraphNode_t *from,
                                     const cudaGraphNode_t *to, const cudaGraphEdgeData *d,
                                     size_t n);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
#endif
