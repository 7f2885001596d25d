/* mxf4_frag.h: register-fragment layout of mma.sync.m16n8k64 ... kind::mxf4nvf4 ...
 * scale_vec::4X ... ue4m3 (sm_120a/121a), shared by mma_w4a4.cu and the CPU emulation test
 * (tests/unit/kernels_ref). Plain C, usable from host and device.
 *
 * ASSUMED, NOT VERIFIED ON HARDWARE (no Blackwell GPU here, and the PTX ISA table was not at
 * hand): A/B/C follow the m16n8k32 8-bit layout with each 32-bit register holding 8 e2m1 codes
 * (element k+i in nibble i, i.e. the checkpoint's packing, so one 4-byte load fills a register);
 * the 4 ue4m3 scales of A row g come from lane 4g (byte i = k-block i) and of row g+8 from lane
 * 4g+1 (thread-id-a = 0), the scales of B column n from lane 4n (thread-id-b = 0). Lane = 4g + t.
 */
#ifndef KERNELS_INTERNAL_MXF4_FRAG_H
#define KERNELS_INTERNAL_MXF4_FRAG_H

#ifdef __CUDACC__
#define MXF4_FN static __host__ __device__ __forceinline__
#else
#define MXF4_FN static inline
#endif

/* A register r (0..3) of lane: tile row and first k of its 8 codes. */
MXF4_FN int mxf4_a_row(int lane, int r)
{
    return (lane >> 2) + ((r & 1) ? 8 : 0);
}
MXF4_FN int mxf4_a_k0(int lane, int r)
{
    return ((r & 2) ? 32 : 0) + 8 * (lane & 3);
}
/* B register r (0..1) of lane: tile column n and first k of its 8 codes. */
MXF4_FN int mxf4_b_col(int lane, int r)
{
    (void)r;
    return lane >> 2;
}
MXF4_FN int mxf4_b_k0(int lane, int r)
{
    return (r ? 32 : 0) + 8 * (lane & 3);
}
/* Accumulator i (0..3) of lane: tile row and column. */
MXF4_FN int mxf4_c_row(int lane, int i)
{
    return (lane >> 2) + ((i & 2) ? 8 : 0);
}
MXF4_FN int mxf4_c_col(int lane, int i)
{
    return 2 * (lane & 3) + (i & 1);
}
/* Which tile row's 4 scales lane supplies for A (-1: none), and which column's for B. */
MXF4_FN int mxf4_sfa_row(int lane)
{
    return (lane & 3) == 0 ? (lane >> 2) : (lane & 3) == 1 ? (lane >> 2) + 8 : -1;
}
MXF4_FN int mxf4_sfb_col(int lane)
{
    return (lane & 3) == 0 ? (lane >> 2) : -1;
}

#endif
