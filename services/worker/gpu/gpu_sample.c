/* gpu_sample: per-row params + penalty pairs + uniforms staged on the host, one sample_cuda
 * launch, tokens back (see gpu_sample.h). */
#include "gpu_sample.h"

#include <stdlib.h>

#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sample.h"

struct gpu_sample {
    int max_rows, vocab, max_pen;
    struct sample_row *h_rows; // (max_rows) staging
    int32_t *h_pen;            // (2 * max_pen): tokens, then counts
    int *h_count;              // (vocab) sample_pen_pairs scratch, kept all 0
    struct sample_row *d_rows; // (max_rows)
    int32_t *d_pen;            // (2 * max_pen)
    int32_t *d_out;            // (max_rows) tokens, then (max_rows) fp32 logprobs
};

void gpu_sample_destroy(struct gpu_sample *gs)
{
    if (!gs)
        return;
    free(gs->h_rows);
    free(gs->h_pen);
    free(gs->h_count);
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
    if (!gs->h_rows || !gs->h_pen || !gs->h_count)
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
        if (p->n_bias || p->n_ban)
            return ERR_INVAL; /* no logit bias / banned ids in the kernel: the host samples those */
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
    int32_t *d_tok = gs->d_out;
    float *d_lp = (float *)(gs->d_out + gs->max_rows);
    cudaError_t e =
        cudaMemcpyAsync(gs->d_rows, gs->h_rows, sizeof(struct sample_row) * (size_t)n_rows,
                        cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess && n_pen > 0)
        e = cudaMemcpyAsync(gs->d_pen, gs->h_pen, sizeof(int32_t) * (size_t)n_pen,
                            cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess && n_pen > 0)
        e = cudaMemcpyAsync(gs->d_pen + gs->max_pen, gs->h_pen + gs->max_pen,
                            sizeof(int32_t) * (size_t)n_pen, cudaMemcpyHostToDevice, stream);
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
