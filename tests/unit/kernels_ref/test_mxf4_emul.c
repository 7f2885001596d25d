/* CPU emulation of the sm_120a W4A4 kernel (mma_w4a4.cu), which cannot run here: its fragment
 * layout (kernels/internal/mxf4_frag.h) must tile A, B, C and the scales exactly once, and a
 * warp-level emulation that loads registers with the kernel's address math and multiplies with
 * the assumed block-scale semantics must equal mma_w4a4_ref. Also: the W4A4 activation quantizer
 * (CHECKPOINTS.md §1.5) and the nvfp4 element decode of kweight_ref_elem. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal/mxf4_frag.h"
#include "kdtype.h"
#include "kweight.h"
#include "mma_w4a4.h"
#include "test.h"

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)rs;
}

static void test_layout(void)
{
    int a[16][64] = {{0}}, b[8][64] = {{0}}, c[16][8] = {{0}}, sa[16] = {0}, sb[8] = {0};
    for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < 8; i++)
                a[mxf4_a_row(lane, r)][mxf4_a_k0(lane, r) + i]++;
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < 8; i++)
                b[mxf4_b_col(lane, r)][mxf4_b_k0(lane, r) + i]++;
        for (int i = 0; i < 4; i++)
            c[mxf4_c_row(lane, i)][mxf4_c_col(lane, i)]++;
        if (mxf4_sfa_row(lane) >= 0)
            sa[mxf4_sfa_row(lane)]++;
        if (mxf4_sfb_col(lane) >= 0)
            sb[mxf4_sfb_col(lane)]++;
    }
    for (int i = 0; i < 16; i++) {
        for (int k = 0; k < 64; k++)
            CHECK_EQ_INT(a[i][k], 1);
        for (int j = 0; j < 8; j++)
            CHECK_EQ_INT(c[i][j], 1);
        CHECK_EQ_INT(sa[i], 1);
    }
    for (int j = 0; j < 8; j++) {
        for (int k = 0; k < 64; k++)
            CHECK_EQ_INT(b[j][k], 1);
        CHECK_EQ_INT(sb[j], 1);
    }
}

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One warp tile computed from per-lane registers exactly as mma_w4a4_kernel loads them. */
static void emulate(float *c, const uint8_t *a, const uint8_t *asf, const uint8_t *b,
                    const uint8_t *bsf, float alpha, int m, int n, int k)
{
    const int lda = k / 2, ldsf = k / 16;
    for (int m0 = 0; m0 < m; m0 += 16)
        for (int n0 = 0; n0 < n; n0 += 8) {
            double d[16][8] = {{0}};
            for (int kk = 0; kk < k; kk += 64) {
                uint32_t ar[32][4], br[32][2], sfa[32], sfb[32];
                double A[16][64], B[8][64];
                for (int lane = 0; lane < 32; lane++) {
                    for (int r = 0; r < 4; r++)
                        ar[lane][r] = ld32(a + (m0 + mxf4_a_row(lane, r)) * lda +
                                           (kk + mxf4_a_k0(lane, r)) / 2);
                    for (int r = 0; r < 2; r++)
                        br[lane][r] = ld32(b + (n0 + mxf4_b_col(lane, r)) * lda +
                                           (kk + mxf4_b_k0(lane, r)) / 2);
                    sfa[lane] = mxf4_sfa_row(lane) >= 0
                                    ? ld32(asf + (m0 + mxf4_sfa_row(lane)) * ldsf + kk / 16)
                                    : 0;
                    sfb[lane] = mxf4_sfb_col(lane) >= 0
                                    ? ld32(bsf + (n0 + mxf4_sfb_col(lane)) * ldsf + kk / 16)
                                    : 0;
                }
                /* the "hardware": scatter the registers back into scaled A and B */
                for (int lane = 0; lane < 32; lane++) {
                    for (int r = 0; r < 4; r++)
                        for (int i = 0; i < 8; i++) {
                            int row = mxf4_a_row(lane, r), kx = mxf4_a_k0(lane, r) + i;
                            A[row][kx] =
                                kdtype_e2m1_to_f32((uint8_t)((ar[lane][r] >> (4 * i)) & 0xf));
                        }
                    for (int r = 0; r < 2; r++)
                        for (int i = 0; i < 8; i++) {
                            int col = mxf4_b_col(lane, r), kx = mxf4_b_k0(lane, r) + i;
                            B[col][kx] =
                                kdtype_e2m1_to_f32((uint8_t)((br[lane][r] >> (4 * i)) & 0xf));
                        }
                }
                for (int lane = 0; lane < 32; lane++) {
                    if (mxf4_sfa_row(lane) >= 0)
                        for (int kx = 0; kx < 64; kx++)
                            A[mxf4_sfa_row(lane)][kx] *=
                                kdtype_e4m3_to_f32((uint8_t)(sfa[lane] >> (8 * (kx / 16))));
                    if (mxf4_sfb_col(lane) >= 0)
                        for (int kx = 0; kx < 64; kx++)
                            B[mxf4_sfb_col(lane)][kx] *=
                                kdtype_e4m3_to_f32((uint8_t)(sfb[lane] >> (8 * (kx / 16))));
                }
                for (int i = 0; i < 16; i++)
                    for (int j = 0; j < 8; j++)
                        for (int kx = 0; kx < 64; kx++)
                            d[i][j] += A[i][kx] * B[j][kx];
            }
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < 4; i++) {
                    int row = mxf4_c_row(lane, i), col = mxf4_c_col(lane, i);
                    c[(m0 + row) * n + n0 + col] = (float)(alpha * d[row][col]);
                }
        }
}

static void test_emulation(int m, int n, int k)
{
    uint8_t *a = malloc((size_t)m * k / 2), *asf = malloc((size_t)m * k / 16);
    uint8_t *b = malloc((size_t)n * k / 2), *bsf = malloc((size_t)n * k / 16);
    float *ref = malloc(sizeof(float) * m * n), *emu = malloc(sizeof(float) * m * n);
    for (int i = 0; i < m * k / 2; i++)
        a[i] = (uint8_t)rnd();
    for (int i = 0; i < n * k / 2; i++)
        b[i] = (uint8_t)rnd();
    for (int i = 0; i < m * k / 16; i++)
        asf[i] = (uint8_t)(0x20 + rnd() % 0x30);
    for (int i = 0; i < n * k / 16; i++)
        bsf[i] = (uint8_t)(0x20 + rnd() % 0x30);
    CHECK_EQ_INT(mma_w4a4_ref(ref, a, asf, b, bsf, 0.25f, m, n, k), 0);
    emulate(emu, a, asf, b, bsf, 0.25f, m, n, k);
    for (int i = 0; i < m * n; i++)
        CHECK_NEAR(emu[i], ref[i], 1e-5 * (1.0 + fabs(ref[i])));
    free(a), free(asf), free(b), free(bsf), free(ref), free(emu);
}

static void test_quant(void)
{
    float x[32];
    uint8_t q[16], sf[2];
    const float g = 448.0f * 6.0f / 12.0f; /* tensor amax 12 */
    for (int i = 0; i < 32; i++)
        x[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f * (i < 16 ? 12.0f : 0.3f);
    x[5] = 12.0f; /* block 0 amax -> scale 448, code 6.0 */
    CHECK_EQ_INT(mma_w4a4_quant_ref(q, sf, x, 1, 32, g), 0);
    CHECK_EQ_INT(sf[0], 0x7e);            /* e4m3(448) */
    CHECK_EQ_INT((q[2] >> 4) & 0xf, 0x7); /* element 5: high nibble of byte 2 = +6 */
    for (int i = 0; i < 32; i++) {
        uint8_t nib = (i & 1) ? (uint8_t)(q[i / 2] >> 4) : (uint8_t)(q[i / 2] & 0xf);
        double s = kdtype_e4m3_to_f32(sf[i / 16]);
        double deq = kdtype_e2m1_to_f32(nib) * s / g;
        /* the e2m1 grid step is at most 2 (between 4 and 6): error <= 1 unit of s/g, plus e4m3
         * rounding of the scale itself (<= 1/16 relative) */
        CHECK(fabs(deq - x[i]) <= s / g * 1.0 + fabs(x[i]) / 16.0 + 1e-7);
        CHECK(kdtype_e2m1_to_f32(nib) * x[i] >= 0); /* sign preserved (or zero) */
    }
    CHECK_EQ_INT(mma_w4a4_quant_ref(q, sf, x, 1, 24, g), -1001); /* ERR_INVAL: cols % 16 */
}

static void test_nvfp4_elem(void)
{
    const uint8_t data[16] = {0x7a, 0x91}; /* codes: -1.0, 6.0, 0.5, -0.5, then zeros */
    const uint8_t bs[2] = {0x38, 0x40};    /* 1.0, 2.0 */
    struct kweight w;
    memset(&w, 0, sizeof(w));
    w.fmt = KW_FMT_NVFP4;
    w.rows = 1;
    w.cols = 32;
    w.row_stride = 32;
    w.data = data;
    w.bscale = bs;
    w.bscale_stride = 2;
    w.gscale = 0.5f;
    CHECK_NEAR(kweight_ref_elem(&w, 0, 0, 0), -0.5, 0);
    CHECK_NEAR(kweight_ref_elem(&w, 0, 0, 1), 3.0, 0);
    CHECK_NEAR(kweight_ref_elem(&w, 0, 0, 2), 0.25, 0);
    CHECK_NEAR(kweight_ref_elem(&w, 0, 0, 3), -0.25, 0);
    CHECK_NEAR(kweight_ref_elem(&w, 0, 0, 4), 0.0, 0);
}

int main(void)
{
    test_layout();
    test_emulation(16, 8, 64);
    test_emulation(32, 24, 192);
    test_quant();
    test_nvfp4_elem();
    return test_result();
}
