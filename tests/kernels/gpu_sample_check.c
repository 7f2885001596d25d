/* gpu_sample (services/worker/gpu) against model/sample.c's sample_token, row by row, over a few
 * decode steps whose tokens feed the histories: same params, same seeds. The rngs must end in
 * the same state (one uniform per sampled row, none per greedy row), and the tokens must be equal
 * except where sample_ref reports a decision within NEAR_TIE of its threshold (rounding: see
 * kernels/sample.h). A third of the rows also carry logit_proc work (kernels/logit_proc.h): a
 * logit bias, banned ids and an allow mask, which sample_token applies itself and gpu_sample on
 * the device first. Exit 77 without a GPU. Needs gpu_sample.c, tern_kernels and tern_model
 * (not in the tests/kernels glob: built where the GPU runner is). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu_sample.h"
#include "logit_proc.h"
#include "model/sample.h"
#include "sample.h"
#include "test.h"

#define NEAR_TIE 1e-6
#define ROWS 48
#define STEPS 4
#define HMAX 64

static struct sample_rng data_rng;

/* the processors of a row (what sample_params points at) */
struct row_procs {
    int32_t bias_ids[4];
    float bias_vals[4];
    uint32_t ban[3];
    uint32_t *allow; // (words) or NULL
};

static void random_procs(struct sample_params *p, struct row_procs *rp, int V)
{
    if (sample_rng_next(&data_rng) % 3)
        return;
    const int words = logit_proc_mask_words(V);
    for (int i = 0; i < 4; i++) {
        rp->bias_ids[i] = (int32_t)(sample_rng_next(&data_rng) % (uint64_t)V);
        rp->bias_vals[i] = (float)(sample_rng_uniform(&data_rng) * 20.0 - 10.0);
    }
    for (int i = 0; i < 3; i++)
        rp->ban[i] = (uint32_t)(sample_rng_next(&data_rng) % (uint64_t)V);
    rp->allow = malloc(sizeof(uint32_t) * (size_t)words);
    for (int w = 0; w < words; w++) /* about one id in four allowed, id 0 always */
        rp->allow[w] = (uint32_t)(sample_rng_next(&data_rng) & sample_rng_next(&data_rng)) |
                       (w == 0 ? 1u : 0u);
    p->bias_ids = rp->bias_ids;
    p->bias_vals = rp->bias_vals;
    p->n_bias = 4;
    p->ban_ids = rp->ban;
    p->n_ban = 3;
    p->allow = rp->allow;
}

static void random_params(struct sample_params *p, int V)
{
    static const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.0f, 1.5f};
    static const float tops[] = {1.0f, 1.0f, 0.95f, 0.8f, 0.3f};
    static const float minps[] = {0.0f, 0.0f, 0.05f, 0.3f};
    const int topk[] = {0, 0, 1, 5, 40, V};
    sample_params_default(p);
    p->temperature = temps[sample_rng_next(&data_rng) % 6];
    p->top_p = tops[sample_rng_next(&data_rng) % 5];
    p->min_p = minps[sample_rng_next(&data_rng) % 4];
    p->top_k = topk[sample_rng_next(&data_rng) % 6];
    if (sample_rng_next(&data_rng) % 2) {
        p->repetition_penalty = 1.2f;
        p->presence_penalty = 0.4f;
        p->frequency_penalty = 0.1f;
    }
}

static void run(int V)
{
    const size_t n = (size_t)ROWS * (size_t)V;
    float *l = malloc(n * 4), *lr = malloc((size_t)V * 4), *d_l = NULL;
    struct sample_params p[ROWS];
    struct row_procs procs[ROWS];
    memset(procs, 0, sizeof procs);
    struct sample_rng rg[ROWS], rm[ROWS];
    int32_t hist[ROWS][HMAX], tok[ROWS], ptok[HMAX], pcnt[HMAX];
    int n_hist[ROWS];
    int *scratch = calloc((size_t)V, sizeof(int));
    struct sample_ctx *sc = sample_ctx_create(V);
    struct gpu_sample *gs = gpu_sample_create(ROWS, V, 0);
    CHECK(gs != NULL && sc != NULL);
    CHECK(cudaMalloc((void **)&d_l, n * 4) == cudaSuccess);
    for (int r = 0; r < ROWS; r++) {
        random_params(&p[r], V);
        random_procs(&p[r], &procs[r], V);
        sample_rng_seed(&rg[r], 1000 + (uint64_t)r);
        rm[r] = rg[r];
        n_hist[r] = (int)(sample_rng_next(&data_rng) % 8);
        for (int i = 0; i < n_hist[r]; i++)
            hist[r][i] = (int32_t)(sample_rng_next(&data_rng) % (uint64_t)V);
    }
    int near = 0, diff = 0, drawn = 0;
    for (int step = 0; step < STEPS; step++) {
        for (size_t i = 0; i < n; i++)
            l[i] = (float)(sample_rng_uniform(&data_rng) * 16.0 - 8.0);
        CHECK(cudaMemcpy(d_l, l, n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
        struct gpu_sample_req req[ROWS];
        for (int r = 0; r < ROWS; r++)
            req[r] = (struct gpu_sample_req){&p[r], hist[r], n_hist[r], &rg[r]};
        CHECK_EQ_INT(gpu_sample_run(gs, d_l, ROWS, req, tok, NULL, 0), 0);
        for (int r = 0; r < ROWS; r++) {
            const float *row = l + (size_t)r * V;
            const int greedy = p[r].temperature <= 0.0f || p[r].top_k == 1;
            const struct sample_rng before = rm[r];
            const int32_t tm = sample_token(sc, &p[r], row, hist[r], n_hist[r], &rm[r]);
            CHECK(memcmp(&rg[r], &rm[r], sizeof(rm[r])) == 0);
            drawn += !greedy;
            if (tm != tok[r]) {
                // the reference's margin for this row and u decides whether it is a near-tie
                struct sample_rng u_rng = before;
                struct sample_row sr = {.temperature = p[r].temperature,
                                        .top_p = p[r].top_p,
                                        .min_p = p[r].min_p,
                                        .repetition_penalty = p[r].repetition_penalty,
                                        .presence_penalty = p[r].presence_penalty,
                                        .frequency_penalty = p[r].frequency_penalty,
                                        .top_k = p[r].top_k,
                                        .u = greedy ? 0.0 : sample_rng_uniform(&u_rng)};
                sr.pen_n = sample_pen_pairs(hist[r], n_hist[r], V, scratch, ptok, pcnt);
                memcpy(lr, row, (size_t)V * 4);
                const struct logit_proc_row pr = {.n_bias = p[r].n_bias, .n_ban = p[r].n_ban,
                                                  .allow_off = p[r].allow ? 0 : -1};
                CHECK_EQ_INT(logit_proc_ref(lr, 1, V, &pr, p[r].bias_ids, p[r].bias_vals,
                                            p[r].ban_ids, p[r].allow), 0);
                int32_t t_ref = -1;
                double margin = 0;
                CHECK_EQ_INT(sample_ref(&t_ref, NULL, lr, &sr, ptok, pcnt, 1, V, &margin), 0);
                CHECK_EQ_INT(t_ref, tok[r]); // the device equals its reference exactly
                if (margin < NEAR_TIE) {
                    near++;
                } else {
                    diff++;
                    fprintf(stderr, "  V=%d step=%d row=%d gpu=%d model=%d margin=%.3g\n", V, step,
                            r, tok[r], tm, margin);
                }
            }
            if (n_hist[r] < HMAX)
                hist[r][n_hist[r]++] = tok[r];
        }
    }
    fprintf(stderr, "gpu_sample V=%d rows=%d steps=%d drawn=%d near_ties=%d mismatches=%d %s\n", V,
            ROWS, STEPS, drawn, near, diff, diff ? "FAIL" : "ok");
    CHECK(diff == 0);
    /* bad params: ERR_INVAL and no rng advanced */
    struct sample_params bad = p[0];
    bad.top_p = 0.0f;
    struct sample_rng keep = rg[0];
    struct gpu_sample_req req = {&bad, NULL, 0, &rg[0]};
    CHECK_EQ_INT(gpu_sample_run(gs, d_l, 1, &req, tok, NULL, 0), ERR_INVAL);
    CHECK(memcmp(&keep, &rg[0], sizeof(keep)) == 0);
    CHECK_EQ_INT(gpu_sample_run(gs, d_l, ROWS + 1, &req, tok, NULL, 0), ERR_TOOBIG);
    for (int r = 0; r < ROWS; r++)
        free(procs[r].allow);
    cudaFree(d_l);
    gpu_sample_destroy(gs);
    sample_ctx_destroy(sc);
    free(l), free(lr), free(scratch);
}

int main(void)
{
    int nd = 0;
    if (cudaGetDeviceCount(&nd) != cudaSuccess || nd == 0)
        TEST_SKIP("no CUDA device");
    sample_rng_seed(&data_rng, 99);
    run(1001);
    run(248320);
    return test_result();
}
