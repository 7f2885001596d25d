/* pack: NVFP4 and FP8 round-trip error bounds, scale definitions, nibble order, W4A4 activation
 * emulation fixed points; st_write: header layout, read-back through the loader's reader,
 * sharding, error codes. */
#include "common/err.h"
#include "common/xalloc.h"
#include "model/dtype.h"
#include "model/pack.h"
#include "model/safetensors.h"
#include "model/st_write.h"
#include "test.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng_state = 12345;

static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static float nrand(void)
{
    double u1 = urand() + 1e-12, u2 = urand();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// ---- NVFP4 ----

/* Half the spacing of the e2m1 grid around magnitude a (in units of the group scale). */
static float e2m1_half_step(float a)
{
    if (a <= 2.0f)
        return 0.25f;
    if (a <= 4.0f)
        return 0.5f;
    return 1.0f;
}

static void test_nvfp4_roundtrip(void)
{
    enum { R = 8, K = 64 };
    float w[R * K], out[R * K];
    for (int i = 0; i < R * K; i++)
        w[i] = nrand() * 0.05f;
    for (int j = 0; j < 16; j++)
        w[2 * K + 16 + j] = 0.0f; /* an all-zero group */
    for (int j = 0; j < 16; j++)
        w[3 * K + j] *= 1e-4f; /* a tiny group (e4m3 scale in the subnormals) */
    w[4 * K + 33] = 1.5f;      /* an outlier: sets the tensor amax */
    float amax = pack_amax(w, R * K);
    CHECK(amax == 1.5f);
    float gs = pack_nvfp4_global(amax);
    CHECK(gs == 448.0f * 6.0f / 1.5f);
    uint8_t packed[R * K / 2], bs[R * K / 16];
    CHECK_EQ_INT(pack_nvfp4(w, R, K, gs, packed, bs), 0);
    pack_nvfp4_dequant(packed, bs, gs, R, K, out);
    int bad = 0;
    for (int r = 0; r < R; r++)
        for (int g = 0; g < K / 16; g++) {
            float a16 = pack_amax(w + r * K + g * 16, 16);
            uint8_t want = dtype_f32_to_e4m3(gs * (a16 / 6.0f));
            CHECK_EQ_INT(bs[r * (K / 16) + g], want);
            float s = dtype_e4m3_to_f32(bs[r * (K / 16) + g]) / gs; /* grid unit */
            for (int j = 0; j < 16; j++) {
                int i = r * K + g * 16 + j;
                float err = fabsf(out[i] - w[i]);
                float bound;
                if (s == 0.0f) {
                    bound = fabsf(w[i]); /* scale underflowed to 0: the group decodes to 0 */
                } else {
                    float a = fabsf(w[i]) / s;
                    bound =
                        e2m1_half_step(fminf(a, 6.0f)) * s + fmaxf(0.0f, fabsf(w[i]) - 6.0f * s);
                }
                if (!(err <= bound * (1.0f + 1e-5f) + 1e-12f)) {
                    if (bad++ < 5)
                        fprintf(stderr, "nvfp4 r=%d g=%d j=%d w=%g out=%g err=%g bound=%g\n", r, g,
                                j, w[i], out[i], err, bound);
                }
            }
        }
    CHECK_EQ_INT(bad, 0);
    for (int j = 0; j < 16; j++)
        CHECK(out[2 * K + 16 + j] == 0.0f);
    /* the element holding the tensor amax is represented exactly: 6 * 448 / gs = amax */
    CHECK_NEAR(out[4 * K + 33], 1.5f, 1e-6);
}

static void test_nvfp4_layout(void)
{
    /* gs = 448*6/6 = 448 and group amax 6 give block scale 448 (0x7e) and unit 1: codes are the
     * values themselves. CHECKPOINTS.md §1.1: 6 -> 0x7, 0 -> 0x0, -3 -> 0xD, 1 -> 0x2, 0.5 -> 0x1,
     * -0.5 -> 0x9, 2.5 -> 2 (tie to even), 5 -> 4 (tie to even); element 2j in the low nibble. */
    float x[32] = {6,     0,     -3,    1,     0.5f, -0.5f, 2.5f, 5,
                   0.25f, 0.75f, 1.25f, 1.75f, 3.5f, -6,    4,    -1.5f};
    for (int j = 16; j < 32; j++)
        x[j] = 0.0f;
    x[16] = 3.0f;
    float gs = pack_nvfp4_global(6.0f);
    CHECK(gs == 448.0f);
    uint8_t p[16], bs[2];
    CHECK_EQ_INT(pack_nvfp4(x, 1, 32, gs, p, bs), 0);
    CHECK_EQ_INT(bs[0], 0x7e);
    CHECK_EQ_INT(p[0], 0x07);
    CHECK_EQ_INT(p[1], 0x2D);
    CHECK_EQ_INT(p[2], 0x91);
    CHECK_EQ_INT(p[3], 0x64); /* 2.5 -> 2 (0x4), 5 -> 4 (0x6) */
    CHECK_EQ_INT(p[4], 0x20); /* 0.25 -> 0, 0.75 -> 1 (0x2) */
    CHECK_EQ_INT(p[5], 0x42); /* 1.25 -> 1, 1.75 -> 2 */
    CHECK_EQ_INT(p[6], 0xF6); /* 3.5 -> 4, -6 */
    CHECK_EQ_INT(p[7], 0xB6); /* 4, -1.5 */
    /* second group: amax 3 -> scale e4m3(448*3/6 = 224) */
    CHECK_NEAR(dtype_e4m3_to_f32(bs[1]), 224.0f, 0.0);
    CHECK_EQ_INT(p[8], 0x07); /* 3 * 448/224 = 6 */
    CHECK_EQ_INT(pack_nvfp4(x, 1, 24, gs, p, bs), ERR_INVAL);
    CHECK(pack_nvfp4_global(0.0f) == 1.0f);
    CHECK(pack_nvfp4_global(INFINITY) == 1.0f);
}

static void test_act_fake_quant(void)
{
    /* values on the e2m1 grid with group amax 6 and g_in = 448 are fixed points */
    float x[32] = {6, 0, -3, 1, 0.5f, -0.5f, 2, 4, -6, 1.5f, 3, -4, 0, 0, 1, -2};
    float y[32];
    for (int j = 16; j < 32; j++)
        x[j] = 0.0f;
    pack_nvfp4_act_fake_quant(x, 32, 448.0f, y);
    for (int j = 0; j < 32; j++)
        CHECK(y[j] == x[j]);
    /* a generic row: error within the group's grid half-step */
    float z[16], q[16];
    for (int j = 0; j < 16; j++)
        z[j] = nrand();
    float g_in = pack_nvfp4_global(8.0f);
    pack_nvfp4_act_fake_quant(z, 16, g_in, q);
    float s = dtype_e4m3_to_f32(dtype_f32_to_e4m3(g_in * pack_amax(z, 16) / 6.0f)) / g_in;
    for (int j = 0; j < 16; j++)
        CHECK(fabsf(q[j] - z[j]) <= e2m1_half_step(fminf(fabsf(z[j]) / s, 6.0f)) * s * 1.0001f +
                                        fmaxf(0.0f, fabsf(z[j]) - 6.0f * s));
}

// ---- FP8 ----

static void check_fp8(enum pack_fp8_scale kind, int block)
{
    enum { R = 40, K = 72 };
    float *w = xmalloc(R * K * sizeof(float)), *out = xmalloc(R * K * sizeof(float));
    for (int i = 0; i < R * K; i++)
        w[i] = nrand() * (0.01f + 0.1f * (float)(i % 7));
    for (int c = 0; c < K; c++)
        w[5 * K + c] = 0.0f; /* a zero row */
    int64_t ns = pack_fp8_n_scales(kind, R, K, block);
    uint8_t *q = xmalloc(R * K);
    float *sc = xmalloc((size_t)ns * sizeof(float));
    CHECK_EQ_INT(pack_fp8(w, R, K, kind, block, q, sc), 0);
    pack_fp8_dequant(q, sc, R, K, kind, block, out);
    /* scale = amax/448 of its region (1 for an all-zero region) */
    float *amax = xcalloc((size_t)ns, sizeof(float));
    for (int r = 0; r < R; r++)
        for (int c = 0; c < K; c++) {
            int64_t si = kind == PACK_FP8_TENSOR ? 0
                         : kind == PACK_FP8_CHANNEL
                             ? r
                             : (r / block) * ((K + block - 1) / block) + c / block;
            amax[si] = fmaxf(amax[si], fabsf(w[r * K + c]));
        }
    for (int64_t i = 0; i < ns; i++)
        CHECK(sc[i] == (amax[i] > 0 ? amax[i] / 448.0f : 1.0f));
    int bad = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < K; c++) {
            int64_t si = kind == PACK_FP8_TENSOR ? 0
                         : kind == PACK_FP8_CHANNEL
                             ? r
                             : (r / block) * ((K + block - 1) / block) + c / block;
            float x = w[r * K + c], err = fabsf(out[r * K + c] - x);
            /* half an ulp of a 3-bit mantissa; subnormals (below 2^-6) have spacing 2^-9 */
            float bound = fmaxf(fabsf(x) * 0.0625f, ldexpf(1.0f, -10) * sc[si]);
            if (!(err <= bound * 1.00001f) && bad++ < 5)
                fprintf(stderr, "fp8 kind=%d r=%d c=%d x=%g out=%g\n", kind, r, c, x,
                        out[r * K + c]);
        }
    CHECK_EQ_INT(bad, 0);
    free(amax);
    free(w);
    free(out);
    free(q);
    free(sc);
}

static void test_fp8(void)
{
    check_fp8(PACK_FP8_TENSOR, 0);
    check_fp8(PACK_FP8_CHANNEL, 0);
    check_fp8(PACK_FP8_BLOCK, 16);
    check_fp8(PACK_FP8_BLOCK, 128);
    CHECK_EQ_INT(pack_fp8_n_scales(PACK_FP8_BLOCK, 300, 129, 128), 3 * 2);
    float x[1] = {1.0f}, s[1];
    uint8_t q[1];
    CHECK_EQ_INT(pack_fp8(x, 1, 1, PACK_FP8_BLOCK, 0, q, s), ERR_INVAL);
}

// ---- st_write ----

static void rm_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

static void test_st_write(void)
{
    char dir[] = "/tmp/tern_st_write_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct st_write *w = st_write_create();
    float a[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
    int64_t s23[2] = {2, 3}, s6 = 6, s3d[3] = {1, 2, 3};
    uint8_t u[5] = {1, 2, 3, 4, 5};
    int64_t s5 = 5;
    float sc = 0.25f;
    CHECK_EQ_INT(st_write_add_f32(w, "z.b", "BF16", 2, s23, a), 0);
    CHECK_EQ_INT(st_write_add_f32(w, "a.f32", "F32", 1, &s6, a), 0);
    CHECK_EQ_INT(st_write_add(w, "m.u8", "U8", 1, &s5, u, 5), 0);
    CHECK_EQ_INT(st_write_add(w, "m.f8", "F8_E4M3", 1, &s5, u, 5), 0);
    CHECK_EQ_INT(st_write_add(w, "m.scalar", "F32", 0, NULL, &sc, 4), 0);
    CHECK_EQ_INT(st_write_add_f32(w, "c.h", "F16", 3, s3d, a), 0);
    CHECK_EQ_INT(st_write_add(w, "m.u8", "U8", 1, &s5, u, 5), ERR_STATE);
    CHECK_EQ_INT(st_write_add(w, "bad", "U8", 1, &s5, u, 4), ERR_INVAL);
    CHECK_EQ_INT(st_write_add(w, "bad", "Q4", 1, &s5, u, 5), ERR_INVAL);
    CHECK_EQ_INT(st_write_count(w), 6);
    CHECK_EQ_INT(st_write_save(w, dir, 0), 0);

    /* header: 8-byte length, JSON padded to 8, keys sorted, __metadata__ first */
    char path[8400], err[256];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    uint8_t len8[8];
    CHECK_EQ_INT(fread(len8, 1, 8, f), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | len8[i];
    CHECK_EQ_INT(n % 8, 0);
    char *hdr = xmalloc(n + 1);
    CHECK_EQ_INT(fread(hdr, 1, n, f), n);
    hdr[n] = '\0';
    fclose(f);
    cJSON *h = cJSON_Parse(hdr);
    CHECK(h != NULL);
    const cJSON *it, *prev = NULL;
    cJSON_ArrayForEach(it, h)
    {
        if (prev && strcmp(prev->string, "__metadata__") != 0)
            CHECK(strcmp(prev->string, it->string) < 0);
        prev = it;
    }
    CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(h, "__metadata__"), "format")
                    ->valuestring,
                "pt");
    cJSON_Delete(h);
    free(hdr);

    /* read back with the loader's reader */
    struct st_set *set = st_open(path, 0, err, sizeof(err));
    CHECK(set != NULL);
    if (set) {
        CHECK_EQ_INT(st_count(set), 6);
        const struct st_tensor *t = st_find(set, "a.f32");
        CHECK(t && t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == 6 &&
              memcmp(t->data, a, sizeof(a)) == 0 && (uintptr_t)t->data % 4 == 0);
        t = st_find(set, "z.b");
        CHECK(t && t->dtype == ST_BF16 && t->ndim == 2 && t->shape[1] == 3);
        if (t)
            for (int i = 0; i < 6; i++)
                CHECK(dtype_bf16_to_f32(((const uint16_t *)t->data)[i]) == dtype_round_bf16(a[i]));
        t = st_find(set, "c.h");
        CHECK(t && t->dtype == ST_F16 && t->ndim == 3 && (uintptr_t)t->data % 2 == 0);
        t = st_find(set, "m.f8");
        CHECK(t && t->dtype == ST_F8_E4M3 && memcmp(t->data, u, 5) == 0);
        t = st_find(set, "m.scalar");
        CHECK(t && t->ndim == 0 && *(const float *)t->data == 0.25f);
        st_close(set);
    } else {
        fprintf(stderr, "st_open: %s\n", err);
    }

    /* sharded: every tensor in a shard of at most 32 data bytes (bigger ones alone) + index */
    char sdir[4200];
    snprintf(sdir, sizeof(sdir), "%s/sh", dir);
    CHECK_EQ_INT(mkdir(sdir, 0755), 0);
    CHECK_EQ_INT(st_write_save(w, sdir, 16), 0);
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", sdir);
    CHECK(access(path, R_OK) == 0);
    set = st_open(sdir, 0, err, sizeof(err));
    CHECK(set != NULL);
    if (set) {
        CHECK_EQ_INT(st_count(set), 6);
        CHECK(st_n_files(set) > 1);
        const struct st_tensor *t = st_find(set, "a.f32");
        CHECK(t && memcmp(t->data, a, sizeof(a)) == 0);
        t = st_find(set, "m.u8");
        CHECK(t && memcmp(t->data, u, 5) == 0);
        st_close(set);
    } else {
        fprintf(stderr, "st_open sharded: %s\n", err);
    }
    st_write_destroy(w);
    rm_dir(dir);
}

int main(void)
{
    test_nvfp4_layout();
    test_nvfp4_roundtrip();
    test_act_fake_quant();
    test_fp8();
    test_st_write();
    return test_result();
}
