/* kstream: cudaStream_t for the plain-C kernel headers without pulling in cuda_runtime.h, so the
 * references (tern_kernels_ref) build on machines without the CUDA toolkit. The typedef is the
 * one in CUDA's driver_types.h; C11 and C++ both accept the repeated identical typedef. */
#ifndef KERNELS_KSTREAM_H
#define KERNELS_KSTREAM_H

typedef struct CUstream_st *cudaStream_t;

#endif
