/* ldsm.cuh: ldmatrix (sm_75+): four 8 x 8 matrices of 16-bit elements from shared memory into
 * the mma.sync fragment layout, one 32-bit register per matrix. Lane L gives the address of row
 * L % 8 of matrix L / 8 (16 contiguous bytes, 16-byte aligned). Plain: lane L receives row L / 4,
 * elements 2 (L % 4) and 2 (L % 4) + 1 of each matrix (low half the first); .trans: column L / 4,
 * rows 2 (L % 4) and 2 (L % 4) + 1. The CUDA emulator (dev/cuda/emu/gen_inc.py) replaces this
 * header with a host version built on its warp exchange. */
#pragma once

#include <stdint.h>

static __device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ void ldsm_x4_t(uint32_t *r, const void *p)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
