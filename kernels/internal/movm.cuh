/* movm.cuh: movmatrix (sm_75+): an 8 x 8 matrix of 16-bit elements held in the mma.sync fragment
 * layout (lane L: row L / 4, elements 2 (L % 4) and 2 (L % 4) + 1, low half the first) becomes
 * its transpose in the same layout: lane L receives column L / 4, rows 2 (L % 4) and
 * 2 (L % 4) + 1. The CUDA emulator (dev/cuda/emu/gen_inc.py) replaces this header with a host
 * version built on its warp exchange. */
#pragma once

#include <stdint.h>

static __device__ __forceinline__ uint32_t movm_t(uint32_t x)
{
    uint32_t r;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
    return r;
}
