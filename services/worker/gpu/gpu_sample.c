/* gpu_sample: per-row params + penalty pairs + uniforms staged on the host, one sample_cuda
 * launch, tokens back (see gpu_sample.h). */
#include "gpu_sample.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "logit_proc.h"
#include "sample.h"

struct gpu_sample {
    int max_rows, vocab, max_pen;
    struct sample_row *h_rows; // (max_rows) staging
    int32_t *h_pen;            // (2 * max_pen): tokens, then counts
    int *h_count;              // (vocab) sample_pen_pairs scratch, kept all 0
    struct sample_row *d_rows; // (max_rows)
    int32_t *d_pen;            // (2 * max_pen)
    int32_t *d_out;            // (max_rows) tokens, then (max_rows) fp32 logprobs
    /* the logits processors: per-row tables, bias pairs, banned ids, allow masks */
    int words;                       // allow mask words per row
    struct logit_proc_row *h_proc;   // (max_rows)
    int32_t *h_bias_ids;             // (max_rows * GPU_SAMPLE_BIAS_PER_ROW)
    float *h_bias_vals;              // (same)
    uint32_t *h_ban;                 // (max_rows * GPU_SAMPLE_BAN_PER_ROW)
    uint32_t *h_allow;               // (max_rows * words)
    struct logit_proc_row *d_proc;
    int32_t *d_bias_ids;
    float *d_bias_vals;
    uint32_t *d_ban;
    uint32_t *d_allow;
};

void gpu_sample_destroy(struct gpu_sample *gs)
{
    if (!gs)
        return;
    free(gs->h_rows);
    free(gs->h_pen);
    free(gs->h_count);
    free(gs->h_proc);
    free(gs->h_bias_ids);
    free(gs->h_bias_vals);
    free(gs->h_ban);
    free(gs->h_allow);
    void *dev[] = {gs->d_proc, gs->d_bias_ids, gs->d_bias_vals, gs->d_ban, gs->d_allow};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            cudaFree(dev[i]);
    if (gs->d_rows)
        cudaFree(gs->d_rows);
    if (gs->d_pen)
        cudaFree(gs->d_pen);
    if (gs->d_out)
        cudaFree(gs->d_out);
    free(gs);
}

struct gpu_sample *gpu_sample_create(int max_rows, int vocab, int max_pen)
{
    if (max_rows <= 0 || vocab <= 0 || vocab > SAMPLE_MAX_VOCAB || max_pen < 0 ||
        max_rows > (1 << 20)) {
        LOG_ERR("gpu_sample_create_failed", "max_rows=%d vocab=%d max_pen=%d why=bad_args",
                max_rows, vocab, max_pen);
        return NULL;
    }
    if (max_pen == 0)
        max_pen = max_rows * GPU_SAMPLE_PEN_PER_ROW;
    struct gpu_sample *gs = xcalloc(1, sizeof(*gs));
    gs->max_rows = max_rows;
    gs->vocab = vocab;
    gs->max_pen = max_pen;
    gs->h_rows = calloc((size_t)max_rows, sizeof(*gs->h_rows));
    gs->h_pen = calloc((size_t)max_pen * 2, sizeof(int32_t));
    gs->h_count = calloc((size_t)vocab, sizeof(int));
    gs->words = logit_proc_mask_words(vocab);
    const size_t nb = (size_t)max_rows * GPU_SAMPLE_BIAS_PER_ROW,
                 nn = (size_t)max_rows * GPU_SAMPLE_BAN_PER_ROW,
                 na = (size_t)max_rows * (size_t)gs->words;
    gs->h_proc = calloc((size_t)max_rows, sizeof(*gs->h_proc));
    gs->h_bias_ids = calloc(nb, sizeof(int32_t));
    gs->h_bias_vals = calloc(nb, sizeof(float));
    gs->h_ban = calloc(nn, sizeof(uint32_t));
    gs->h_allow = calloc(na, sizeof(uint32_t));
    if (!gs->h_rows || !gs->h_pen || !gs->h_count || !gs->h_proc || !gs->h_bias_ids ||
        !gs->h_bias_vals || !gs->h_ban || !gs->h_allow)
        goto fail;
    if (cudaMalloc((void **)&gs->d_proc, sizeof(*gs->d_proc) * (size_t)max_rows) != cudaSuccess ||
        cudaMalloc((void **)&gs->d_bias_ids, sizeof(int32_t) * nb) != cudaSuccess ||
        cudaMalloc((void **)&gs->d_bias_vals, sizeof(float) * nb) != cudaSuccess ||
        cudaMalloc((void **)&gs->d_ban, sizeof(uint32_t) * nn) != cudaSuccess ||
        cudaMalloc((void **)&gs->d_allow, sizeof(uint32_t) * na) != cudaSuccess)
        goto fail;
    if (cudaMalloc((void **)&gs->d_rows, sizeof(struct sample_row) * (size_t)max_rows) !=
            cudaSuccess ||
        cudaMalloc((void **)&gs->d_pen, sizeof(int32_t) * 2 * (size_t)max_pen) != cudaSuccess ||
        cudaMalloc((void **)&gs->d_out, sizeof(int32_t) * 2 * (size_t)max_rows) != cudaSuccess)
        goto fail;
    return gs;
fail:
    LOG_ERR("gpu_sample_create_failed", "max_rows=%d vocab=%d max_pen=%d why=no_memory", max_rows,
            vocab, max_pen);
    (void)cudaGetLastError();
    gpu_sample_destroy(gs);
    return NULL;
}

/* Rows and penalty pairs into the host staging; 0, ERR_INVAL, ERR_TOOBIG. No rng advanced. */
static int stage_rows(struct gpu_sample *gs, int n_rows, const struct gpu_sample_req *req,
                      int *n_pen)
{
    int32_t *tok = gs->h_pen, *cnt = gs->h_pen + gs->max_pen;
    int np = 0;
    for (int r = 0; r < n_rows; r++) {
        const struct sample_params *p = req[r].params;
        if (!p || !req[r].rng || req[r].n_hist < 0 || (req[r].n_hist > 0 && !req[r].hist))
            return ERR_INVAL;
        if (p->n_bias < 0 || p->n_ban < 0 || (p->n_bias && (!p->bias_ids || !p->bias_vals)) ||
            (p->n_ban && !p->ban_ids))
            return ERR_INVAL;
        if (p->n_bias > GPU_SAMPLE_BIAS_PER_ROW || p->n_ban > GPU_SAMPLE_BAN_PER_ROW)
            return ERR_TOOBIG;
        struct sample_row *row = &gs->h_rows[r];
        *row = (struct sample_row){
            .temperature = p->temperature,
            .top_p = p->top_p,
            .min_p = p->min_p,
            .repetition_penalty = p->repetition_penalty,
            .presence_penalty = p->presence_penalty,
            .frequency_penalty = p->frequency_penalty,
            .top_k = p->top_k,
            .pen_off = np,
        };
        if (sample_row_check(row) != 0)
            return ERR_INVAL;
        if (sample_params_penalised(p) && req[r].n_hist > 0) {
            // unique tokens <= n_hist: check the room before writing
            const int room = gs->max_pen - np;
            if (req[r].n_hist > room) {
                int uniq = 0; // count exactly only when the cheap bound fails
                for (int i = 0; i < req[r].n_hist; i++) {
                    const int32_t t = req[r].hist[i];
                    if (t >= 0 && t < gs->vocab && gs->h_count[t]++ == 0)
                        uniq++;
                }
                for (int i = 0; i < req[r].n_hist; i++) {
                    const int32_t t = req[r].hist[i];
                    if (t >= 0 && t < gs->vocab)
                        gs->h_count[t] = 0;
                }
                if (uniq > room)
                    return ERR_TOOBIG;
            }
            row->pen_n = sample_pen_pairs(req[r].hist, req[r].n_hist, gs->vocab, gs->h_count,
                                          tok + np, cnt + np);
            np += row->pen_n;
        }
    }
    *n_pen = np;
    return 0;
}

/* What the rows' processors fill of the staging: bias pairs, banned ids, allow words. */
struct proc_fill {
    int n_bias, n_ban, n_allow;
};

/* The rows' bias pairs, banned ids and allow masks into the host staging, packed in row order
 * (stage_rows checked the per-row counts, so they fit). Returns whether any row has one. */
static bool stage_procs(struct gpu_sample *gs, int n_rows, const struct gpu_sample_req *req,
                        struct proc_fill *f)
{
    *f = (struct proc_fill){0, 0, 0};
    for (int r = 0; r < n_rows; r++) {
        const struct sample_params *p = req[r].params;
        struct logit_proc_row *pr = &gs->h_proc[r];
        *pr = (struct logit_proc_row){.bias_off = f->n_bias,
                                      .n_bias = p->n_bias,
                                      .ban_off = f->n_ban,
                                      .n_ban = p->n_ban,
                                      .allow_off = p->allow ? f->n_allow : -1};
        if (p->n_bias) {
            memcpy(gs->h_bias_ids + f->n_bias, p->bias_ids, sizeof(int32_t) * (size_t)p->n_bias);
            memcpy(gs->h_bias_vals + f->n_bias, p->bias_vals, sizeof(float) * (size_t)p->n_bias);
            f->n_bias += p->n_bias;
        }
        if (p->n_ban) {
            memcpy(gs->h_ban + f->n_ban, p->ban_ids, sizeof(uint32_t) * (size_t)p->n_ban);
            f->n_ban += p->n_ban;
        }
        if (p->allow) {
            memcpy(gs->h_allow + f->n_allow, p->allow, sizeof(uint32_t) * (size_t)gs->words);
            f->n_allow += gs->words;
        }
    }
    return f->n_bias || f->n_ban || f->n_allow;
}

/* One host-to-device copy of bytes (none when 0) on stream, while *e is still cudaSuccess. */
static void h2d(cudaError_t *e, void *dst, const void *src, size_t bytes, cudaStream_t stream)
{
    if (*e == cudaSuccess && bytes > 0)
        *e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
}

/* Upload the packed tables (one copy each) and run logit_proc over the n_rows rows. */
static int run_procs(struct gpu_sample *gs, float *d_logits, int n_rows,
                     const struct proc_fill *f, cudaStream_t stream)
{
    cudaError_t e = cudaSuccess;
    h2d(&e, gs->d_proc, gs->h_proc, sizeof(*gs->h_proc) * (size_t)n_rows, stream);
    h2d(&e, gs->d_bias_ids, gs->h_bias_ids, sizeof(int32_t) * (size_t)f->n_bias, stream);
    h2d(&e, gs->d_bias_vals, gs->h_bias_vals, sizeof(float) * (size_t)f->n_bias, stream);
    h2d(&e, gs->d_ban, gs->h_ban, sizeof(uint32_t) * (size_t)f->n_ban, stream);
    h2d(&e, gs->d_allow, gs->h_allow, sizeof(uint32_t) * (size_t)f->n_allow, stream);
    if (e != cudaSuccess) {
        LOG_ERR("gpu_sample_failed", "rows=%d err=\"%s\"", n_rows, cudaGetErrorString(e));
        return ERR_CUDA;
    }
    return logit_proc_cuda(d_logits, n_rows, gs->vocab, gs->d_proc, gs->d_bias_ids,
                           gs->d_bias_vals, gs->d_ban, gs->d_allow, stream);
}

int gpu_sample_run(struct gpu_sample *gs, float *d_logits, int n_rows,
                   const struct gpu_sample_req *req, int32_t *tokens, float *logprobs,
                   cudaStream_t stream)
{
    if (!gs || !d_logits || n_rows < 0 || (n_rows > 0 && (!req || !tokens)))
        return ERR_INVAL;
    if (n_rows > gs->max_rows)
        return ERR_TOOBIG;
    if (n_rows == 0)
        return 0;
    int n_pen = 0;
    int rc = stage_rows(gs, n_rows, req, &n_pen);
    if (rc != 0)
        return rc;
    // every row valid: draw the uniforms now, exactly where sample_token would
    for (int r = 0; r < n_rows; r++) {
        const struct sample_params *p = req[r].params;
        const int greedy = p->temperature <= 0.0f || p->top_k == 1;
        gs->h_rows[r].u = greedy ? 0.0 : sample_rng_uniform(req[r].rng);
    }
    struct proc_fill pf;
    if (stage_procs(gs, n_rows, req, &pf) &&
        (rc = run_procs(gs, d_logits, n_rows, &pf, stream)) != 0)
        return rc;
    int32_t *d_tok = gs->d_out;
    float *d_lp = (float *)(gs->d_out + gs->max_rows);
    cudaError_t e = cudaSuccess;
    h2d(&e, gs->d_rows, gs->h_rows, sizeof(struct sample_row) * (size_t)n_rows, stream);
    h2d(&e, gs->d_pen, gs->h_pen, sizeof(int32_t) * (size_t)n_pen, stream);
    h2d(&e, gs->d_pen + gs->max_pen, gs->h_pen + gs->max_pen, sizeof(int32_t) * (size_t)n_pen,
        stream);
    if (e != cudaSuccess)
        goto cuda_fail;
    rc = sample_cuda(d_tok, logprobs ? d_lp : NULL, d_logits, gs->d_rows, gs->d_pen,
                     gs->d_pen + gs->max_pen, n_rows, gs->vocab, stream);
    if (rc != 0)
        return rc;
    e = cudaMemcpyAsync(tokens, d_tok, sizeof(int32_t) * (size_t)n_rows, cudaMemcpyDeviceToHost,
                        stream);
    if (e == cudaSuccess && logprobs)
        e = cudaMemcpyAsync(logprobs, d_lp, sizeof(float) * (size_t)n_rows, cudaMemcpyDeviceToHost,
                            stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
        goto cuda_fail;
    return 0;
cuda_fail:
    LOG_ERR("gpu_sample_failed", "rows=%d err=\"%s\"", n_rows, cudaGetErrorString(e));
    return ERR_CUDA;
}
