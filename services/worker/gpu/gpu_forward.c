/* gpu_forward: one forward step of the qwen3_5_moe model over several sequences (MODEL.md §3),
 * all on the device: embed -> per layer (RMSNorm1p, GDN or gated attention, residual + norm,
 * MoE) -> final norm -> lm_head for the rows that need logits.
 *
 * Prefill: a chunk of n tokens runs as n sub-steps of the decode kernels (every item that
 * still has a token at that offset is batched into the sub-step). Correct, not fast.
 *
 * GDN with head dims other than 128 (tiny test models): gdn_step is built for 128-wide heads,
 * so q/k/v/z are copied into zero-padded 128-wide heads. With f^2 = Dk/128 (the q scale
 * 1/sqrt(128) instead of 1/sqrt(Dk)) the padded output is o_pad = f o over Dv lanes, and the
 * gated norm over 128 lanes gives w o rsqrt(mean(o^2) + eps') sqrt(128/Dv) with
 * eps' = eps Dk Dv / 128^2; the norm weight is uploaded times sqrt(Dv/128). Zeros in the pad
 * lanes stay zero in S and in the output (z = 0 there, silu(0) = 0). */
#include "gpu_internal.h"

#include <math.h>
#include <string.h>

#include "argmax.h"
#include "attn_decode.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "embed.h"
#include "fused_add_rmsnorm.h"
#include "gdn_conv.h"
#include "gdn_step.h"
#include "gemv.h"
#include "kv_write.h"
#include "moe_expert.h"
#include "moe_route.h"
#include "rmsnorm.h"
#include "rope.h"

#define TRY(call)              \
    do {                       \
        int rc_ = (call);      \
        if (rc_ < 0)           \
            return rc_;        \
    } while (0)

static int cu(cudaError_t e)
{
    if (e == cudaSuccess)
        return 0;
    LOG_ERR("gpu_cuda_error", "err=\"%s\"", cudaGetErrorString(e));
    return ERR_CUDA;
}

/* rows of width w floats from a (pitch sp) to b (pitch dp) */
static int copy2d(struct gpu_model *g, float *dst, int dp, const float *src, int sp, int w,
                  int64_t rows)
{
    return cu(cudaMemcpy2DAsync(dst, sizeof(float) * (size_t)dp, src, sizeof(float) * (size_t)sp,
                                sizeof(float) * (size_t)w, (size_t)rows,
                                cudaMemcpyDeviceToDevice, g->stream));
}

static int gdn_mixer(struct gpu_model *g, struct gpu_layer *L, int n)
{
    cudaStream_t st = g->stream;
    const int32_t *slots = g->d_in + gpu_in_slots(g);
    TRY(gemv_cuda(g->mix_raw, &L->qkv, 0, g->x, n, st));
    TRY(gemv_cuda(g->gz, &L->z, 0, g->x, n, st));
    TRY(gemv_cuda(g->gb, &L->b, 0, g->x, n, st));
    TRY(gemv_cuda(g->ga, &L->a, 0, g->x, n, st));
    TRY(gdn_conv_cuda(g->mix, L->conv_state, g->mix_raw, L->conv_w, slots, n, g->cd, g->kc, st));
    if (!g->gdn_pad) {
        TRY(gdn_step_cuda(g->go, L->ssm, g->mix, g->gz, g->ga, g->gb, L->a_log, L->dt_bias,
                          L->gnorm, slots, n, g->hk, g->hv, g->gdn_eps, st));
    } else {
        const int D = GPU_GDN_D, wp = (2 * g->hk + g->hv) * D;
        if (g->dk == g->dv) {
            TRY(copy2d(g, g->qkv_p, D, g->mix, g->dk, g->dk, (int64_t)n * (2 * g->hk + g->hv)));
        } else {
            for (int t = 0; t < n; t++) {
                const float *src = g->mix + (int64_t)t * g->cd;
                float *dst = g->qkv_p + (int64_t)t * wp;
                TRY(copy2d(g, dst, D, src, g->dk, g->dk, 2 * g->hk));
                TRY(copy2d(g, dst + 2 * g->hk * D, D, src + 2 * g->hk * g->dk, g->dv, g->dv,
                           g->hv));
            }
        }
        TRY(copy2d(g, g->z_p, D, g->gz, g->dv, g->dv, (int64_t)n * g->hv));
        TRY(gdn_step_cuda(g->o_p, L->ssm, g->qkv_p, g->z_p, g->ga, g->gb, L->a_log, L->dt_bias,
                          L->gnorm, slots, n, g->hk, g->hv, g->gdn_eps, st));
        TRY(copy2d(g, g->go, g->dv, g->o_p, D, g->dv, (int64_t)n * g->hv));
    }
    return gemv_cuda(g->y, &L->out, 0, g->go, n, st);
}

static int attn_mixer(struct gpu_model *g, struct gpu_layer *L, int n)
{
    cudaStream_t st = g->stream;
    const int32_t *pos = g->d_in + gpu_in_pos(g);
    const int hd = g->hd, hq = g->hq, hkv = g->hkv;
    const float eps = g->cfg.rms_eps, theta = g->cfg.rope_theta;
    const float *gate = NULL;
    if (g->cfg.attn_output_gate) {
        TRY(gemv_cuda(g->qg, &L->q, 0, g->x, n, st));
        TRY(copy2d(g, g->q, hd, g->qg, 2 * hd, hd, (int64_t)n * hq));
        TRY(copy2d(g, g->gate, hd, g->qg + hd, 2 * hd, hd, (int64_t)n * hq));
        gate = g->gate;
    } else {
        TRY(gemv_cuda(g->q, &L->q, 0, g->x, n, st));
    }
    TRY(gemv_cuda(g->k, &L->k, 0, g->x, n, st));
    TRY(gemv_cuda(g->v, &L->v, 0, g->x, n, st));
    TRY(rmsnorm_cuda(g->q, g->q, L->q_norm, n * hq, hd, eps, 1.0f, st));
    TRY(rmsnorm_cuda(g->k, g->k, L->k_norm, n * hkv, hd, eps, 1.0f, st));
    TRY(rope_cuda(g->q, pos, n, hq, hd, g->cfg.rotary_dim, (int64_t)hq * hd, hd, theta, st));
    TRY(rope_cuda(g->k, pos, n, hkv, hd, g->cfg.rotary_dim, (int64_t)hkv * hd, hd, theta, st));
    TRY(kv_write_cuda(L->k_cache, L->v_cache, g->k, g->v, g->d_in + gpu_in_map(g), n, hkv, hd,
                      st));
    TRY(attn_decode_cuda(g->ao, g->attn_ws, g->q, gate, L->k_cache, L->v_cache,
                         g->d_in + gpu_in_table(g), g->d_in + gpu_in_lens(g), n, hq, hkv, hd,
                         g->o.block_tokens, g->bps, g->o.max_model_len, 1.0f / sqrtf((float)hd),
                         st));
    return gemv_cuda(g->y, &L->o, 0, g->ao, n, st);
}

static int moe_block(struct gpu_model *g, struct gpu_layer *L, int n)
{
    cudaStream_t st = g->stream;
    TRY(gemv_cuda(g->moe_logits, &L->router, 0, g->x, n, st));
    TRY(moe_route_cuda(g->moe_ids, g->moe_w, g->moe_logits, n, g->E, g->K, st));
    TRY(moe_expert_cuda(g->y, g->moe_ws, g->x, g->moe_ids, g->moe_w, n, g->K, g->E, &L->gate_up,
                        &L->down, 0, st));
    if (!L->has_shared)
        return 0;
    /* sigmoid(s) as the top-2 softmax of [s, 0]; the zero row's slot (id 1) is outside the
     * one-expert stack and contributes nothing */
    TRY(gemv_cuda(g->sh_logits, &L->sh_gate, 0, g->x, n, st));
    TRY(moe_route_cuda(g->sh_ids, g->sh_w, g->sh_logits, n, 2, 2, st));
    return moe_expert_cuda(g->y, g->moe_ws, g->x, g->sh_ids, g->sh_w, n, 2, 1, &L->sh_gate_up,
                           &L->sh_down, 1, st);
}

/* The n rows already in d_in: embed .. final norm into g->x. */
int gpu_run_layers(struct gpu_model *g, int n)
{
    cudaStream_t st = g->stream;
    const int H = g->H;
    const float eps = g->cfg.rms_eps;
    TRY(embed_cuda(g->h, g->embed, g->d_in + gpu_in_tokens(g), n, H, g->V, st));
    for (int l = 0; l < g->cfg.n_layers; l++) {
        struct gpu_layer *L = &g->layers[l];
        if (l == 0)
            TRY(rmsnorm_cuda(g->x, g->h, L->in_norm, n, H, eps, 1.0f, st));
        else
            TRY(fused_add_rmsnorm_cuda(g->x, g->h, g->y, L->in_norm, n, H, eps, 1.0f, st));
        TRY(L->type == LAYER_FULL_ATTN ? attn_mixer(g, L, n) : gdn_mixer(g, L, n));
        TRY(fused_add_rmsnorm_cuda(g->x, g->h, g->y, L->post_norm, n, H, eps, 1.0f, st));
        TRY(moe_block(g, L, n));
    }
    return fused_add_rmsnorm_cuda(g->x, g->h, g->y, g->final_norm, n, H, eps, 1.0f, st);
}

/* Validate an item; 0 or the item's error. */
static int check_item(const struct gpu_model *g, const struct gpu_item *it, const bool *seen)
{
    if (it->slot < 0 || it->slot >= g->o.n_slots || seen[it->slot])
        return ERR_INVAL;
    if (g->pos[it->slot] < 0 || g->pos[it->slot] != it->pos)
        return ERR_STATE;
    if (it->n < 1 || !it->tokens)
        return ERR_INVAL;
    for (int t = 0; t < it->n; t++)
        if (it->tokens[t] < 0 || it->tokens[t] >= g->V)
            return ERR_INVAL;
    const int64_t end = (int64_t)it->pos + it->n;
    if (end > g->o.max_model_len)
        return ERR_FULL;
    const int64_t need = CEIL_DIV(end, (int64_t)g->o.block_tokens);
    if (it->blocks) {
        if (it->n_blocks < need || it->n_blocks > g->bps)
            return ERR_FULL;
        for (int b = 0; b < it->n_blocks; b++)
            if (it->blocks[b] >= (uint32_t)g->o.kv_blocks)
                return ERR_RANGE;
    } else if ((int64_t)(it->slot + 1) * g->bps > g->o.kv_blocks) {
        return ERR_FULL; // no default blocks for this slot: the caller must pass a table
    }
    return 0;
}

int gpu_model_step(struct gpu_model *g, struct gpu_item *items, int n_items)
{
    const int B = g->o.n_slots, bt = g->o.block_tokens;
    if (n_items < 0 || n_items > B)
        return ERR_INVAL;
    bool *seen = g->h_seen;
    memset(seen, 0, sizeof(bool) * (size_t)B);
    int max_n = 0;
    for (int i = 0; i < n_items; i++) {
        struct gpu_item *it = &items[i];
        it->rc = check_item(g, it, seen);
        if (it->rc == 0) {
            seen[it->slot] = true;
            if (it->n > max_n)
                max_n = it->n;
        }
    }
    int *act = g->h_act;
    for (int t = 0; t < max_n; t++) {
        int ns = 0;
        for (int i = 0; i < n_items; i++)
            if (items[i].rc == 0 && t < items[i].n)
                act[ns++] = i;
        if (ns == 0)
            continue;
        /* the previous sub-step must be done with h_in before it is rewritten */
        TRY(cu(cudaStreamSynchronize(g->stream)));
        int32_t *hin = g->h_in;
        memset(hin + gpu_in_table(g), 0, sizeof(int32_t) * (size_t)B * (size_t)g->bps);
        for (int r = 0; r < ns; r++) {
            const struct gpu_item *it = &items[act[r]];
            const int p = it->pos + t;
            int32_t *tab = hin + gpu_in_table(g) + (int64_t)r * g->bps;
            for (int b = 0; b < g->bps; b++)
                tab[b] = it->blocks ? (b < it->n_blocks ? (int32_t)it->blocks[b] : 0)
                                    : it->slot * g->bps + b;
            hin[gpu_in_tokens(g) + r] = it->tokens[t];
            hin[gpu_in_pos(g) + r] = p;
            hin[gpu_in_slots(g) + r] = it->slot;
            hin[gpu_in_map(g) + r] = tab[p / bt] * bt + p % bt;
            hin[gpu_in_lens(g) + r] = p + 1;
        }
        TRY(cu(cudaMemcpyAsync(g->d_in, hin, sizeof(int32_t) * (size_t)gpu_in_count(g),
                               cudaMemcpyHostToDevice, g->stream)));
        if (g->use_graphs)
            TRY(cu(cudaGraphLaunch(g->graphs[ns], g->stream)));
        else
            TRY(gpu_run_layers(g, ns));
        /* rows that need logits: the last token of items that ask */
        int *out_rows = g->h_rows, nl = 0, want_argmax = 0;
        for (int r = 0; r < ns; r++) {
            const struct gpu_item *it = &items[act[r]];
            if (t != it->n - 1 || (!it->logits && !it->argmax))
                continue;
            want_argmax |= it->argmax != NULL;
            TRY(cu(cudaMemcpyAsync(g->xl + (int64_t)nl * g->H, g->x + (int64_t)r * g->H,
                                   sizeof(float) * (size_t)g->H, cudaMemcpyDeviceToDevice,
                                   g->stream)));
            out_rows[nl++] = act[r];
        }
        if (nl == 0)
            continue;
        TRY(gemv_cuda(g->logits, &g->lm_head, 0, g->xl, nl, g->stream));
        if (want_argmax) {
            TRY(argmax_cuda(g->argmax_ids, g->logits, nl, g->V, g->stream));
            TRY(cu(cudaMemcpyAsync(g->h_argmax, g->argmax_ids, sizeof(int32_t) * (size_t)nl,
                                   cudaMemcpyDeviceToHost, g->stream)));
        }
        for (int j = 0; j < nl; j++)
            if (items[out_rows[j]].logits)
                TRY(cu(cudaMemcpyAsync(g->h_logits + (int64_t)j * g->V,
                                       g->logits + (int64_t)j * g->V,
                                       sizeof(float) * (size_t)g->V, cudaMemcpyDeviceToHost,
                                       g->stream)));
        TRY(cu(cudaStreamSynchronize(g->stream)));
        for (int j = 0; j < nl; j++) {
            struct gpu_item *it = &items[out_rows[j]];
            if (it->logits)
                memcpy(it->logits, g->h_logits + (int64_t)j * g->V, sizeof(float) * (size_t)g->V);
            if (it->argmax)
                *it->argmax = g->h_argmax[j];
        }
    }
    TRY(cu(cudaStreamSynchronize(g->stream)));
    for (int i = 0; i < n_items; i++)
        if (items[i].rc == 0)
            g->pos[items[i].slot] += items[i].n;
    return 0;
}
