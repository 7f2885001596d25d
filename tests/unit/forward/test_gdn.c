/* Gated DeltaNet core: the chunked form (§4.2) equals the per-token recurrence (§4.1) over
 * ragged lengths, with and without an incoming state, and split across calls. */
#include "model/gdn.h"

#include "common/tpool.h"
#include "test.h"
#include "testmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { HK = 2, HV = 4, DK = 16, DV = 12, LD = 2 * HK * DK + HV * DV + 3 };

struct inputs {
    int n;
    float *qkv;                // (n, LD)
    float *g, *beta;           // (n, HV)
};

static void normalise(float *x, int n, float scale)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    for (int i = 0; i < n; i++)
        x[i] = (float)(x[i] * scale / sqrt(ss + 1e-6));
}

static void make_inputs(struct inputs *in, int n, struct trng *r)
{
    in->n = n;
    in->qkv = malloc(sizeof(float) * (size_t)(n * LD));
    in->g = malloc(sizeof(float) * (size_t)(n * HV));
    in->beta = malloc(sizeof(float) * (size_t)(n * HV));
    for (int i = 0; i < n * LD; i++)
        in->qkv[i] = trng_normal(r, 1.0f);
    for (int t = 0; t < n; t++) {
        for (int h = 0; h < HK; h++) {
            normalise(in->qkv + t * LD + h * DK, DK, 1.0f / sqrtf(DK));
            normalise(in->qkv + t * LD + HK * DK + h * DK, DK, 1.0f);
        }
        for (int j = 0; j < HV; j++) {
            in->g[t * HV + j] = -(float)(0.02 + 1.5 * trng_uniform(r) * trng_uniform(r));
            in->beta[t * HV + j] = (float)(0.05 + 0.9 * trng_uniform(r));
        }
    }
}

static void free_inputs(struct inputs *in)
{
    free(in->qkv);
    free(in->g);
    free(in->beta);
}

static struct gdn_seq seq_of(const struct inputs *in, int t0, int n, float *state, float *out)
{
    struct gdn_seq s = {
        .n_tok = n, .n_k_heads = HK, .n_v_heads = HV, .dk = DK, .dv = DV, .ld = LD,
        .q = in->qkv + t0 * LD, .k = in->qkv + t0 * LD + HK * DK,
        .v = in->qkv + t0 * LD + 2 * HK * DK, .g = in->g + t0 * HV, .beta = in->beta + t0 * HV,
        .state = state, .out = out,
    };
    return s;
}

int main(void)
{
    struct tpool *tp = tpool_create(2);
    float *scratch = malloc(sizeof(float) * (size_t)gdn_chunked_scratch_floats(HV, DK, DV));
    const int lens[] = { 1, 5, 63, 64, 65, 130 };
    struct trng r = { 12345 };
    const int NS = HV * DK * DV;
    float s0[HV * DK * DV];
    for (int with_state = 0; with_state < 2; with_state++) {
        for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            const int n = lens[li];
            struct inputs in;
            make_inputs(&in, n, &r);
            for (int i = 0; i < NS; i++)
                s0[i] = with_state ? trng_normal(&r, 0.5f) : 0.0f;
            float *sa = malloc(sizeof(float) * NS), *sb = malloc(sizeof(float) * NS);
            float *oa = malloc(sizeof(float) * (size_t)(n * HV * DV));
            float *ob = malloc(sizeof(float) * (size_t)(n * HV * DV));
            memcpy(sa, s0, sizeof(s0));
            memcpy(sb, s0, sizeof(s0));
            struct gdn_seq a = seq_of(&in, 0, n, sa, oa), b = seq_of(&in, 0, n, sb, ob);
            gdn_core_recurrent(&a, tp);
            gdn_core_chunked(&b, scratch, tp);
            double eo = rel_err(ob, oa, (int64_t)n * HV * DV), es = rel_err(sb, sa, NS);
            fprintf(stderr, "len=%d state=%d rel_out=%.3g rel_state=%.3g\n", n, with_state, eo,
                    es);
            CHECK(eo < 1e-4);
            CHECK(es < 1e-4);
            // the output must depend on the state and on the inputs (not trivially zero)
            double mo = 0;
            for (int i = 0; i < n * HV * DV; i++)
                mo = fmax(mo, fabs(oa[i]));
            CHECK(mo > 1e-3);

            // split into two calls: chunked prefix then chunked / recurrent rest
            if (n > 2) {
                const int n1 = n / 2 + 1;
                memcpy(sb, s0, sizeof(s0));
                struct gdn_seq b1 = seq_of(&in, 0, n1, sb, ob);
                gdn_core_chunked(&b1, scratch, tp);
                struct gdn_seq b2 = seq_of(&in, n1, n - n1, sb, ob + (int64_t)n1 * HV * DV);
                gdn_core_chunked(&b2, scratch, NULL);
                CHECK(rel_err(ob, oa, (int64_t)n * HV * DV) < 1e-4);
                CHECK(rel_err(sb, sa, NS) < 1e-4);
            }
            free(sa);
            free(sb);
            free(oa);
            free(ob);
            free_inputs(&in);
        }
    }

    // hand check of one recurrent step: S0 = 0, so S = beta k v^T and o = beta (q.k) v
    {
        struct inputs in;
        make_inputs(&in, 1, &r);
        float s[HV * DK * DV] = { 0 }, o[HV * DV];
        struct gdn_seq a = seq_of(&in, 0, 1, s, o);
        gdn_core_recurrent(&a, NULL);
        for (int j = 0; j < HV; j++) {
            const int h = j / (HV / HK);
            const float *q = in.qkv + h * DK, *k = in.qkv + HK * DK + h * DK;
            const float *v = in.qkv + 2 * HK * DK + j * DV;
            double qk = 0;
            for (int i = 0; i < DK; i++)
                qk += (double)q[i] * k[i];
            for (int i = 0; i < DV; i++)
                CHECK_NEAR(o[j * DV + i], in.beta[j] * qk * v[i], 1e-5);
        }
        free_inputs(&in);
    }
    free(scratch);
    tpool_destroy(tp);
    return test_result();
}
