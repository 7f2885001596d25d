/* CPU checks of the kernel references against independent formulations or exact properties, so
 * that "GPU == reference" means something: rope (rotation of pairs, norm kept, untouched tail),
 * moe_route (order, ties, normalisation), gdn_step (MODEL.md §4.1 vs the chunked form §4.2 over
 * several tokens), gdn_seq at a state stride larger than the packed one (the same bits, padding
 * untouched), attn_decode (one key, equal keys), gemv on each format against hand decoding. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_decode.h"
#include "common/err.h"
#include "gdn_seq.h"
#include "gdn_step.h"
#include "gemv.h"
#include "kdtype.h"
#include "kweight.h"
#include "moe_route.h"
#include "rope.h"
#include "test.h"

static uint64_t rs = 0x1234567887654321ull;
static float urand(float lo, float hi)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return lo + (hi - lo) * (float)((rs >> 11) & 0xffffff) / 16777216.0f;
}

static void test_rope(void)
{
    float x[2][256], y[2][256];
    int32_t pos[2] = {0, 12345};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 256; i++)
            x[t][i] = y[t][i] = urand(-1, 1);
    CHECK_EQ_INT(rope_ref(&y[0][0], pos, 2, 1, 256, 64, 256, 256, 1e7f), 0);
    for (int i = 0; i < 256; i++)
        CHECK_NEAR(y[0][i], x[0][i], 0); /* position 0: identity */
    for (int i = 64; i < 256; i++)
        CHECK_NEAR(y[1][i], x[1][i], 0); /* beyond rot_dim: untouched */
    for (int i = 0; i < 32; i++) {
        /* pair (i, i+32) rotated by p * theta^(-2i/64): compare with a complex multiply */
        /* MODEL.md §3.4: fp32 inv_freq and one fp32 multiply for the angle */
        float inv = (float)(1.0 / pow(1e7, 2.0 * i / 64.0));
        double ang = (double)(12345.0f * inv);
        double re = x[1][i] * cos(ang) - x[1][i + 32] * sin(ang);
        double im = x[1][i + 32] * cos(ang) + x[1][i] * sin(ang);
        CHECK_NEAR(y[1][i], re, 2e-5);
        CHECK_NEAR(y[1][i + 32], im, 2e-5);
        CHECK_NEAR(hypot(y[1][i], y[1][i + 32]), hypot(x[1][i], x[1][i + 32]), 1e-5);
    }
}

static void test_route(void)
{
    float l[2][8] = {{1, 3, 3, 0, -1, 3, 2, 2}, {0, 0, 0, 0, 0, 0, 0, 5}};
    int32_t ids[2][3];
    float w[2][3];
    CHECK_EQ_INT(moe_route_ref(&ids[0][0], &w[0][0], &l[0][0], 2, 8, 3), 0);
    CHECK_EQ_INT(ids[0][0], 1); /* three-way tie at 3: ascending ids */
    CHECK_EQ_INT(ids[0][1], 2);
    CHECK_EQ_INT(ids[0][2], 5);
    CHECK_NEAR(w[0][0], 1.0 / 3.0, 1e-6);
    CHECK_EQ_INT(ids[1][0], 7);
    CHECK_EQ_INT(ids[1][1], 0);
    CHECK_EQ_INT(ids[1][2], 1);
    /* renormalised: p7 / (p7 + 2 p0) with p ~ exp(logit) */
    CHECK_NEAR(w[1][0], exp(5.0) / (exp(5.0) + 2.0), 1e-6);
    CHECK_NEAR(w[1][0] + w[1][1] + w[1][2], 1.0, 1e-6);
    CHECK_EQ_INT(moe_route_ref(&ids[0][0], &w[0][0], &l[0][0], 1, 8, 9), -1001);
}

/* Chunked gated delta rule (MODEL.md §4.2) for one head, T tokens, chunk C, double precision. */
static void gdn_chunked(double *S, const double (*qn)[128], const double (*kn)[128],
                        const double (*v)[128], const double *beta, const double *g, int T, int C,
                        double (*o)[128])
{
    enum { D = 128 };
    for (int c0 = 0; c0 < T; c0 += C) {
        int n = T - c0 < C ? T - c0 : C;
        double G[64], Tm[64][64], U[64][D], W[64][D], Vn[64][D];
        double acc = 0;
        for (int i = 0; i < n; i++)
            G[i] = (acc += g[c0 + i]);
        /* Tm = (I + L)^-1 applied by forward substitution to diag(beta) V and diag(beta e^G) K */
        memset(Tm, 0, sizeof(Tm));
        for (int i = 0; i < n; i++) {
            for (int d = 0; d < D; d++) {
                U[i][d] = beta[c0 + i] * v[c0 + i][d];
                W[i][d] = beta[c0 + i] * exp(G[i]) * kn[c0 + i][d];
            }
            for (int j = 0; j < i; j++) {
                double kk = 0;
                for (int d = 0; d < D; d++)
                    kk += kn[c0 + i][d] * kn[c0 + j][d];
                double L = beta[c0 + i] * kk * exp(G[i] - G[j]);
                for (int d = 0; d < D; d++) {
                    U[i][d] -= L * U[j][d];
                    W[i][d] -= L * W[j][d];
                }
            }
        }
        for (int i = 0; i < n; i++)
            for (int d = 0; d < D; d++) {
                double ws = 0;
                for (int k = 0; k < D; k++)
                    ws += W[i][k] * S[k * D + d];
                Vn[i][d] = U[i][d] - ws;
            }
        for (int i = 0; i < n; i++)
            for (int d = 0; d < D; d++) {
                double r = 0;
                for (int k = 0; k < D; k++)
                    r += qn[c0 + i][k] * S[k * D + d];
                r *= exp(G[i]);
                for (int j = 0; j <= i; j++) {
                    double qk = 0;
                    for (int k = 0; k < D; k++)
                        qk += qn[c0 + i][k] * kn[c0 + j][k];
                    r += qk * exp(G[i] - G[j]) * Vn[j][d];
                }
                o[c0 + i][d] = r;
            }
        for (int k = 0; k < D; k++)
            for (int d = 0; d < D; d++) {
                double s = exp(G[n - 1]) * S[k * D + d];
                for (int j = 0; j < n; j++)
                    s += exp(G[n - 1] - G[j]) * kn[c0 + j][k] * Vn[j][d];
                S[k * D + d] = s;
            }
        (void)Tm;
    }
}

static void test_gdn_chunked(void)
{
    enum { D = 128, T = 11 };
    static double qn[T][D], kn[T][D], v[T][D], o[T][D], S[D * D];
    static float st[D * D], qkv[T][3 * D], zz[T][D], out[T][D];
    double beta[T], g[T];
    float a[T], b[T], alog = -0.3f, dtb = 0.2f, nw[D];
    for (int i = 0; i < D * D; i++)
        S[i] = st[i] = urand(-0.2f, 0.2f);
    for (int i = 0; i < D; i++)
        nw[i] = 1.0f;
    for (int t = 0; t < T; t++) {
        double sq = 0, sk = 0;
        for (int i = 0; i < 3 * D; i++)
            qkv[t][i] = urand(-1, 1);
        for (int i = 0; i < D; i++) {
            zz[t][i] = 30.0f; /* silu(30) ~ 30: the gated norm becomes 30 * rmsnorm */
            sq += (double)qkv[t][i] * qkv[t][i];
            sk += (double)qkv[t][D + i] * qkv[t][D + i];
        }
        for (int i = 0; i < D; i++) {
            qn[t][i] = qkv[t][i] / sqrt(sq + 1e-6) / sqrt((double)D);
            kn[t][i] = qkv[t][D + i] / sqrt(sk + 1e-6);
            v[t][i] = qkv[t][2 * D + i];
        }
        a[t] = urand(-2, 2);
        b[t] = urand(-2, 2);
        double x = (double)a[t] + dtb;
        g[t] = -exp((double)alog) * log1p(exp(x));
        beta[t] = 1.0 / (1.0 + exp(-(double)b[t]));
    }
    for (int t = 0; t < T; t++) /* recurrent reference, one token at a time */
        CHECK_EQ_INT(gdn_step_ref(out[t], st, qkv[t], zz[t], &a[t], &b[t], &alog, &dtb, nw, NULL, 1,
                                  1, 1, 1e-6f),
                     0);
    gdn_chunked(S, qn, kn, v, beta, g, T, 4, o); /* chunks of 4: 3 chunks, ragged last */
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < D; i++)
            ss += o[t][i] * o[t][i];
        double inv = 1.0 / sqrt(ss / D + 1e-6), sz = 30.0 / (1.0 + exp(-30.0));
        for (int i = 0; i < D; i++)
            CHECK_NEAR(out[t][i], o[t][i] * inv * sz, 2e-4 * (1 + fabs(o[t][i] * inv * sz)));
    }
    for (int i = 0; i < D * D; i++)
        CHECK_NEAR(st[i], S[i], 1e-5);
}

/* gdn_seq_conv_ref / gdn_seq_step_ref with the states at a wider stride (the KV pool keeps each
 * in its own chunk of blocks): exactly the packed results, nothing written between states. */
static void test_gdn_seq_stride(void)
{
    enum { HK = 1, HV = 2, KC = 4, CH = (2 * HK + HV) * 128, SLOTS = 3, ROWS = 5 };
    const size_t win = (size_t)CH * (KC - 1), ss = (size_t)HV * 128 * 128;
    const size_t cstr = win + 20, sstr = ss + 36;
    int32_t items[2 * GDN_SEQ_ITEM_INTS] = {0, 3, 2, 0, 3, 2, 0, -1}; /* slots 2 and 0 */
    float *x = malloc(ROWS * CH * 4), *w = malloc(CH * KC * 4), *z = malloc(ROWS * HV * 128 * 4);
    float *a = malloc(ROWS * HV * 4), *b = malloc(ROWS * HV * 4), alog[HV], dtb[HV], nw[128];
    float *c0 = malloc(SLOTS * win * 4), *c1 = malloc(SLOTS * cstr * 4);
    float *s0 = malloc(SLOTS * ss * 4), *s1 = malloc(SLOTS * sstr * 4);
    float *co0 = malloc(ROWS * CH * 4), *co1 = malloc(ROWS * CH * 4);
    float *so0 = malloc(ROWS * HV * 128 * 4), *so1 = malloc(ROWS * HV * 128 * 4);
    float *cn0 = calloc(3 * win, 4), *cn1 = calloc(3 * win, 4);
    float *sn0 = calloc(3 * ss, 4), *sn1 = calloc(3 * ss, 4);
    for (int i = 0; i < ROWS * CH; i++)
        x[i] = urand(-2, 2);
    for (int i = 0; i < CH * KC; i++)
        w[i] = urand(-1, 1);
    for (int i = 0; i < ROWS * HV * 128; i++)
        z[i] = urand(-2, 2);
    for (int i = 0; i < ROWS * HV; i++)
        a[i] = urand(-3, 3), b[i] = urand(-3, 3);
    for (int i = 0; i < HV; i++)
        alog[i] = urand(-2, 1), dtb[i] = urand(-1, 1);
    for (int i = 0; i < 128; i++)
        nw[i] = urand(0.5f, 1.5f);
    for (size_t i = 0; i < SLOTS * cstr; i++)
        c1[i] = -7.0f;
    for (size_t i = 0; i < SLOTS * sstr; i++)
        s1[i] = -7.0f;
    for (int sl = 0; sl < SLOTS; sl++) {
        for (size_t i = 0; i < win; i++)
            c0[sl * win + i] = c1[sl * cstr + i] = urand(-1, 1);
        for (size_t i = 0; i < ss; i++)
            s0[sl * ss + i] = s1[sl * sstr + i] = urand(-0.1f, 0.1f);
    }
    const float s2_first = s0[2 * ss]; /* slot 2's first S entry before its 3 rows */
    CHECK_EQ_INT(gdn_seq_conv_ref(co0, c0, 0, cn0, 3, x, w, items, 2, CH, KC), 0);
    CHECK_EQ_INT(gdn_seq_conv_ref(co1, c1, (int64_t)cstr, cn1, 3, x, w, items, 2, CH, KC), 0);
    CHECK_EQ_INT(gdn_seq_step_ref(so0, s0, 0, sn0, 3, co0, z, a, b, alog, dtb, nw, items, 2, HK,
                                  HV, 1e-6f), 0);
    CHECK_EQ_INT(gdn_seq_step_ref(so1, s1, (int64_t)sstr, sn1, 3, co0, z, a, b, alog, dtb, nw,
                                  items, 2, HK, HV, 1e-6f), 0);
    CHECK(memcmp(co0, co1, ROWS * CH * 4) == 0 && memcmp(so0, so1, ROWS * HV * 128 * 4) == 0);
    CHECK(memcmp(cn0, cn1, 3 * win * 4) == 0 && memcmp(sn0, sn1, 3 * ss * 4) == 0);
    int pad_written = 0;
    for (int sl = 0; sl < SLOTS; sl++) {
        CHECK(memcmp(c0 + sl * win, c1 + sl * cstr, win * 4) == 0);
        CHECK(memcmp(s0 + sl * ss, s1 + sl * sstr, ss * 4) == 0);
        for (size_t i = win; i < cstr; i++)
            pad_written += c1[sl * cstr + i] != -7.0f;
        for (size_t i = ss; i < sstr; i++)
            pad_written += s1[sl * sstr + i] != -7.0f;
    }
    CHECK_EQ_INT(pad_written, 0);
    /* the items did change their states (the comparison is not vacuous) and a stride below the
     * packed one is refused */
    CHECK(memcmp(s0 + 2 * ss, s1 + 2 * sstr, ss * 4) == 0 && s0[2 * ss] != s2_first);
    CHECK_EQ_INT(gdn_seq_conv_ref(co1, c1, (int64_t)win - 1, NULL, 0, x, w, items, 2, CH, KC),
                 ERR_INVAL);
    CHECK_EQ_INT(gdn_seq_step_ref(so1, s1, (int64_t)ss - 1, NULL, 0, co0, z, a, b, alog, dtb, nw,
                                  items, 2, HK, HV, 1e-6f),
                 ERR_INVAL);
    free(x), free(w), free(z), free(a), free(b), free(c0), free(c1), free(s0), free(s1);
    free(co0), free(co1), free(so0), free(so1), free(cn0), free(cn1), free(sn0), free(sn1);
}

static void test_attn(void)
{
    /* one sequence of 3 keys, all equal: the output is v for any q; with one key too */
    enum { H = 2, KV = 1, HD = 8, BS = 2 };
    uint16_t kc[4 * BS * KV * HD], vc[4 * BS * KV * HD];
    float q[H * HD], gate[H * HD], out[H * HD];
    int32_t bt[2] = {3, 1}, lens[1] = {3};
    for (int s = 0; s < 4 * BS; s++)
        for (int d = 0; d < HD; d++) {
            kc[s * HD + d] = kdtype_f32_to_bf16(0.5f);
            vc[s * HD + d] = kdtype_f32_to_bf16((float)d);
        }
    for (int i = 0; i < H * HD; i++) {
        q[i] = urand(-3, 3);
        gate[i] = 0.0f; /* sigmoid(0) = 1/2 */
    }
    CHECK_EQ_INT(
        attn_decode_ref(out, NULL, q, gate, kc, vc, bt, lens, 1, H, KV, HD, BS, 2, 3, 0.3f), 0);
    for (int h = 0; h < H; h++)
        for (int d = 0; d < HD; d++)
            CHECK_NEAR(out[h * HD + d], 0.5 * d, 1e-6);
    /* distinct values at the third key only (slot bt[1]*BS + 0): one key -> exactly its v */
    lens[0] = 1;
    CHECK_EQ_INT(
        attn_decode_ref(out, NULL, q, NULL, kc, vc, bt, lens, 1, H, KV, HD, BS, 2, 3, 0.3f), 0);
    for (int d = 0; d < HD; d++)
        CHECK_NEAR(out[d], (double)d, 1e-6);
}

static void test_gemv_formats(void)
{
    /* 2 x 32 weight in each format; x = unit vectors pick single weights */
    uint16_t wb[64];
    uint8_t wf[64], wn[32], bs[4];
    float sc[2] = {0.5f, 2.0f}, x[32], y[2];
    struct kweight w;
    for (int i = 0; i < 64; i++) {
        wb[i] = kdtype_f32_to_bf16((float)(i - 30) / 8.0f);
        wf[i] = kdtype_f32_to_e4m3((float)(i - 30) / 8.0f);
    }
    for (int i = 0; i < 32; i++)
        wn[i] = (uint8_t)(i * 7 + 3);
    bs[0] = 0x38, bs[1] = 0x40, bs[2] = 0x30, bs[3] = 0x48; /* 1, 2, 0.5, 4 */
    for (int c = 0; c < 32; c += 5) {
        memset(x, 0, sizeof(x));
        x[c] = 1.0f;
        memset(&w, 0, sizeof(w));
        w.rows = 2, w.cols = 32, w.row_stride = 32;
        w.fmt = KW_FMT_BF16, w.data = wb;
        gemv_ref(y, &w, 0, x, 1);
        CHECK_NEAR(y[1], (32 + c - 30) / 8.0, 0);
        w.fmt = KW_FMT_FP8, w.data = wf, w.scale = sc, w.scale_kind = KW_SCALE_CHANNEL;
        gemv_ref(y, &w, 0, x, 1);
        CHECK_NEAR(y[1], 2.0 * kdtype_e4m3_to_f32(wf[32 + c]), 0);
        w.fmt = KW_FMT_NVFP4, w.data = wn, w.bscale = bs, w.bscale_stride = 2, w.gscale = 0.25f;
        gemv_ref(y, &w, 0, x, 1);
        uint8_t byte = wn[16 + c / 2], nib = (c & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
        CHECK_NEAR(y[1], kdtype_e2m1_to_f32(nib) * kdtype_e4m3_to_f32(bs[2 + c / 16]) * 0.25, 0);
    }
}

int main(void)
{
    test_rope();
    test_route();
    test_gdn_chunked();
    test_gdn_seq_stride();
    test_attn();
    test_gemv_formats();
    return test_result();
}
