/* gpu_forward: one forward step of the qwen3_5_moe model over several sequences (MODEL.md §3),
 * all on the device: embed -> per layer (RMSNorm1p, GDN or gated attention, residual + norm,
 * MoE) -> final norm -> lm_head for the rows that need logits.
 *
 * One pass per step over all rows (the tokens of every item, item by item): embed,
 * projections and MoE on all rows at once; GDN through kernels/gdn_seq (per item, rows in order,
 * state on chip); attention writes K/V for all rows first, then attends one query row per token
 * with seq_len = pos+1 and the item's block table copied into that row, which is causal within
 * the chunk. Logits only for the rows that need them, in batches of lrows.
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
#include "attn_prefill.h"
#include "attn_prep.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "embed.h"
#include "fused_add_rmsnorm.h"
#include "gdn_seq.h"
#include "gemv.h"
#include "kv_write.h"
#include "moe_route.h"
#include "rmsnorm.h"
#include "rope.h"

#define TRY(call)              \
    do {                       \
        int rc_ = (call);      \
        if (rc_ < 0)           \
            return rc_;        \
    } while (0)

int gpu_cu(cudaError_t e)
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
    return gpu_cu(cudaMemcpy2DAsync(dst, sizeof(float) * (size_t)dp, src, sizeof(float) * (size_t)sp,
                                sizeof(float) * (size_t)w, (size_t)rows,
                                cudaMemcpyDeviceToDevice, g->stream));
}

static int gdn_mixer(struct gpu_model *g, struct gpu_layer *L, const struct gpu_pass *p)
{
    cudaStream_t st = g->stream;
    const int n = p->rows;
    const int32_t *items = p->gitems;
    {
        /* one launch where a kernel takes all four (nvfp4 qkv + z on the stream kernel, bf16
         * b + a a warp per row beside them), else qkv + z and b + a */
        float *const ys[4] = { g->mix_raw, g->gz, g->gb, g->ga };
        const struct kweight *const ws[4] = { &L->qkv, &L->z, &L->b, &L->a };
        if (gpu_linear_multi_kind(g, 4, ws, n) != GEMV_MULTI_NONE) {
            TRY(gpu_linear_multi(g, 4, ys, ws, g->x, n));
        } else {
            TRY(gpu_linear_multi(g, 2, ys, ws, g->x, n));
            TRY(gpu_linear_multi(g, 2, ys + 2, ws + 2, g->x, n));
        }
    }
    const int64_t sst = g->o.state_in_pool ? g->state_stride : 0;
    if (g->disp.gdn_conv_fused && p->max_n == 1 && !g->gdn_pad &&
        gdn_seq_step_tiles(p->items, g->hv, 1) == 1) {
        /* one-row items where the recurrence runs one block a head: the conv inside its launch */
        TRY(gdn_seq_conv_step_cuda(g->go, L->ssm, sst, L->ssm_snap, L->conv_state, sst,
                                   L->conv_snap, g->n_snap, g->mix_raw, L->conv_w, g->cd, g->kc,
                                   g->gz, g->ga, g->gb, L->a_log, L->dt_bias, L->gnorm, items,
                                   p->items, g->hk, g->hv, g->gdn_eps, g->gdn_norm_cnt, st));
        return gpu_linear(g, g->y, &L->out, g->go, n);
    }
    TRY(gdn_seq_conv_cuda(g->mix, L->conv_state, sst, L->conv_snap, g->n_snap, g->mix_raw,
                          L->conv_w, items, p->items, n, g->cd, g->kc, st));
    /* long items (prefill) take the chunked recurrence; its workspace is the expert scratch,
     * idle until this layer's MoE block (same stream) */
    const int chunk = g->disp.gdn_chunk_rows;
    if (!g->gdn_pad) {
        TRY(gdn_seq_step_chunked_cuda(
            g->go, L->ssm, g->o.state_in_pool ? g->state_stride : 0, L->ssm_snap, g->n_snap, g->mix,
            g->gz, g->ga, g->gb, L->a_log, L->dt_bias, L->gnorm, items, p->items, g->hk, g->hv,
            g->gdn_eps, chunk, p->max_n, g->moe_ws, g->R, g->gdn_norm_cnt, st));
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
        TRY(gdn_seq_step_chunked_cuda(
            g->o_p, L->ssm, g->o.state_in_pool ? g->state_stride : 0, L->ssm_snap, g->n_snap,
            g->qkv_p, g->z_p, g->ga, g->gb, L->a_log, L->dt_bias, L->gnorm, items, p->items, g->hk,
            g->hv, g->gdn_eps, chunk, p->max_n, g->moe_ws, g->R, g->gdn_norm_cnt, st));
        TRY(copy2d(g, g->go, g->dv, g->o_p, D, g->dv, (int64_t)n * g->hv));
    }
    return gpu_linear(g, g->y, &L->out, g->go, n);
}

int gpu_attn_inputs(struct gpu_model *g, struct gpu_layer *L, const struct gpu_pass *p)
{
    cudaStream_t st = g->stream;
    const int n = p->rows;
    const int32_t *pos = p->pos;
    const int hd = g->hd, hq = g->hq, hkv = g->hkv;
    const int64_t qd = (int64_t)hq * hd;
    const float eps = g->cfg.rms_eps, theta = g->cfg.rope_theta;
    const float *gate = NULL;
    {
        float *const ys[3] = { g->cfg.attn_output_gate ? g->qg : g->q, g->k, g->v };
        const struct kweight *const ws[3] = { &L->q, &L->k, &L->v };
        TRY(gpu_linear_multi(g, 3, ys, ws, g->x, n));
    }
    if (g->cfg.attn_output_gate)
        gate = g->gate;
    /* every row's K/V first: row t of an item then sees rows 0..t of its chunk (bf16 or e4m3
     * storage, scales 1.0) */
    if (g->disp.attn_prep) {
        /* split, q/k norms, rope and the cache stores in one launch */
        TRY(attn_prep_cuda(g->q, gate ? g->gate : NULL, gate ? g->qg : g->q, g->k, g->v,
                           L->k_cache, L->v_cache, g->kv_dtype, 1.0f, 1.0f, L->q_norm, L->k_norm,
                           pos, p->map, n, hq, hkv, hd, g->cfg.rotary_dim, eps, theta, st));
    } else {
        if (gate) {
            TRY(copy2d(g, g->q, hd, g->qg, 2 * hd, hd, (int64_t)n * hq));
            TRY(copy2d(g, g->gate, hd, g->qg + hd, 2 * hd, hd, (int64_t)n * hq));
        }
        TRY(rmsnorm_cuda(g->q, g->q, L->q_norm, n * hq, hd, eps, 1.0f, st));
        TRY(rmsnorm_cuda(g->k, g->k, L->k_norm, n * hkv, hd, eps, 1.0f, st));
        TRY(rope_cuda(g->q, pos, n, hq, hd, g->cfg.rotary_dim, qd, hd, theta, st));
        TRY(rope_cuda(g->k, pos, n, hkv, hd, g->cfg.rotary_dim, (int64_t)hkv * hd, hd, theta,
                      st));
        TRY(kv_write_dtype_cuda(L->k_cache, L->v_cache, g->k, g->v, p->map, n, hkv, hd,
                                g->kv_dtype, 1.0f, 1.0f, st));
    }
    return 0;
}

int gpu_attn_mixer(struct gpu_model *g, struct gpu_layer *L, const struct gpu_pass *p)
{
    cudaStream_t st = g->stream;
    const int n = p->rows;
    const int hd = g->hd, hq = g->hq, hkv = g->hkv;
    const int64_t qd = (int64_t)hq * hd;
    const float *gate = g->cfg.attn_output_gate ? g->gate : NULL;
    TRY(gpu_attn_inputs(g, L, p));
    /* items of few rows (decode rows, verify windows): split over the keys when the pass has
     * several of them (batched verify windows; batched decode where attn_decode is not the GQA
     * form), else row by row (attn_decode below: decode rows, a verify window); items of more
     * than 16 rows (attn_prefill_rows) through the flash-style prefill */
    const bool few = g->disp.attn_split_rows > 0 && p->max_n <= g->disp.attn_split_rows;
    /* one row an item (batched decode) goes row by row too where attn_decode is the GQA form
     * (a kv head's K/V read once for its query heads there as well, at the bandwidth) */
    const bool rows1 = p->max_n <= 1 && g->disp.attn_decode_path == ATTN_DECODE_PATH_GQA;
    if (p->aseqs && few && !rows1 && p->items >= g->disp.attn_split_items) {
        /* the parts from the pass's items, rows and length (a graph's: max_model_len) */
        const int parts =
            attn_prefill_split_parts(p->items, p->max_n, hq, hkv, p->max_len, g->n_sms);
        if ((int64_t)attn_prefill_split_ws_floats(n, hq, hd, parts) <= g->attn_ws_floats) {
            TRY(attn_prefill_split_cuda(
                g->ao, g->attn_ws, parts, g->q, gate, L->k_cache, L->v_cache, g->kv_dtype, p->table,
                p->ts, (const struct attn_prefill_seq *)p->aseqs, p->items, p->max_n, hq, hkv, hd,
                g->o.block_tokens, 1.0f / sqrtf((float)hd), st));
            return gpu_linear(g, g->y, &L->o, g->ao, n);
        }
    }
    if (p->aseqs && p->max_n >= g->disp.attn_prefill_rows) {
        /* items of several rows: flash-style prefill over every item at once; the block table
         * row of item i is its first row's (seq = row_start) */
        TRY(attn_prefill_batch_path_cuda(g->ao, g->q, gate, L->k_cache, L->v_cache, g->kv_dtype,
                                         1.0f, 1.0f, p->table, p->ts,
                                         (const struct attn_prefill_seq *)p->aseqs, p->items,
                                         p->max_n, hq, hkv, hd, g->o.block_tokens,
                                         1.0f / sqrtf((float)hd), g->disp.attn_prefill_path, st));
        return gpu_linear(g, g->y, &L->o, g->ao, n);
    }
    /* the split workspace holds any pass of up to n_slots rows at max_model_len: longer passes
     * go in groups of the most rows whose partials fit */
    int64_t grp = n;
    while (grp > 1 &&
           (int64_t)attn_decode_ws_floats((int)grp, hq, hkv, hd, p->max_len) > g->attn_ws_floats)
        grp = grp > g->o.n_slots ? g->o.n_slots : grp - 1;
    if ((int64_t)attn_decode_ws_floats((int)grp, hq, hkv, hd, p->max_len) > g->attn_ws_floats)
        return ERR_INVAL; // cannot happen: max_len <= max_model_len
    for (int r0 = 0; r0 < n; r0 += (int)grp) {
        const int nr = (int)(n - r0 < grp ? n - r0 : grp);
        TRY(attn_decode_path_cuda(
            /* new keys: this pass's rows, each its own key (a sequence's rows at consecutive
             * positions), stored by attn_prep just before */
            g->disp.attn_decode_path, g->ao + r0 * qd, g->attn_ws, n, g->q + r0 * qd,
            gate ? gate + r0 * qd : NULL, L->k_cache, L->v_cache, g->kv_dtype, 1.0f, 1.0f,
            p->table + (int64_t)r0 * p->ts, p->lens + r0, nr, hq, hkv, hd, g->o.block_tokens, p->ts,
            p->max_len, 1.0f / sqrtf((float)hd), st));
    }
    return gpu_linear(g, g->y, &L->o, g->ao, n);
}

int gpu_moe_block(struct gpu_model *g, struct gpu_layer *L, int n)
{
    cudaStream_t st = g->stream;
    const int64_t H = g->H;
    /* moe_expert_cuda puts rows x top_k on one grid axis (<= 65535, ERR_INVAL beyond): passes
     * longer than that (max_rows > 8191 at top-8) go in row groups; one call otherwise */
    const int grp = 65535 / (g->K > 2 ? g->K : 2);
    /* the shared expert as slot K of every row (expert E of the stacks, weight sigmoid of its
     * gate): one gate_up and one down launch for all nine experts */
    const bool fold = L->has_shared && L->sh_folded && n <= g->disp.fold_rows[L->gate_up.fmt];
    /* few rows with the router on its GEMV: router, shared gate and routing in one launch */
    int rc = ERR_UNSUPPORTED;
    if (n <= g->disp.multi_rows && (!L->has_shared || fold) &&
        !(g->lin && L->router_f32 && n >= g->disp.router_rows)) {
        rc = moe_router_cuda(g->moe_ids, g->moe_w, g->moe_logits, g->sh_logits, g->router_counter,
                             g->x, &L->router, fold ? &L->sh_gate : NULL, n, g->K, st);
        if (rc < 0 && rc != ERR_UNSUPPORTED)
            return rc;
    }
    if (rc == ERR_UNSUPPORTED) {
        TRY(gpu_router(g, L, n));
        if (L->has_shared)
            TRY(gpu_linear(g, g->sh_logits, &L->sh_gate, g->x, n));
        TRY(fold ? moe_route_shared_cuda(g->moe_ids, g->moe_w, g->moe_logits, g->sh_logits, 2, n,
                                         g->E, g->K, st)
                 : moe_route_cuda(g->moe_ids, g->moe_w, g->moe_logits, n, g->E, g->K, st));
    }
    /* fold_rows keeps n on moe_expert's rows: one call. The router wrote slot K = E; the kernel
     * right before is the router (or moe_route), which does not write x: the shared slot's
     * gate/up may run before the wait (fold_early) */
    if (fold)
        return gpu_experts(g, g->y, g->x, g->moe_ids, g->moe_w, n, g->K + 1, g->E + 1, &L->gate_up,
                           &L->down, 0, g->disp.fold_early ? g->E : -1);
    for (int r0 = 0; r0 < n; r0 += grp) {
        const int nr = n - r0 < grp ? n - r0 : grp;
        const int64_t o = (int64_t)r0 * g->K;
        TRY(gpu_experts(g, g->y + r0 * H, g->x + r0 * H, g->moe_ids + o, g->moe_w + o, nr, g->K,
                        g->E, &L->gate_up, &L->down, 0, -1));
    }
    if (!L->has_shared)
        return 0;
    /* sigmoid(s) as the top-2 softmax of [s, 0]; the zero row's slot (id 1) is outside the
     * one-expert stack and contributes nothing */
    TRY(moe_route_cuda(g->sh_ids, g->sh_w, g->sh_logits, n, 2, 2, st));
    for (int r0 = 0; r0 < n; r0 += grp) {
        const int nr = n - r0 < grp ? n - r0 : grp;
        TRY(gpu_experts(g, g->y + r0 * H, g->x + r0 * H, g->sh_ids + 2 * (int64_t)r0,
                        g->sh_w + 2 * (int64_t)r0, nr, 2, 1, &L->sh_gate_up, &L->sh_down, 1, -1));
    }
    return 0;
}

void gpu_pass_main(const struct gpu_model *g, struct gpu_pass *p, int rows, int items, int ts,
                   int max_len)
{
    *p = (struct gpu_pass){ rows, items, ts, max_len, g->d_in + gpu_in_tokens(g),
                            g->d_in + gpu_in_pos(g), g->d_in + gpu_in_map(g),
                            g->d_in + gpu_in_lens(g), g->d_in + gpu_in_table(g),
                            g->d_in + gpu_in_items(g), g->d_in + gpu_in_aseqs(g), 1 };
}

/* The pass over the rows already in d_in: embed .. final norm into g->x. */
int gpu_run_layers(struct gpu_model *g, const struct gpu_pass *p)
{
    cudaStream_t st = g->stream;
    const int H = g->H, n = p->rows;
    const float eps = g->cfg.rms_eps;
    if (n < 1 || n > g->R || p->items < 1 || p->items > g->o.n_slots || p->ts < 1 ||
        p->ts > g->bps || p->max_len < 1 || p->max_len > p->ts * g->o.block_tokens ||
        p->max_len > g->o.max_model_len)
        return ERR_INVAL;
    /* the embedding and the first layer's input norm in one launch */
    TRY(embed_rmsnorm_cuda(g->h, g->x, g->embed, p->tokens, n, H, g->V, g->layers[0].in_norm, eps,
                           1.0f, st));
    for (int l = 0; l < g->cfg.n_layers; l++) {
        struct gpu_layer *L = &g->layers[l];
        if (l > 0)
            TRY(fused_add_rmsnorm_cuda(g->x, g->h, g->y, L->in_norm, n, H, eps, 1.0f, st));
        TRY(L->type == LAYER_FULL_ATTN ? gpu_attn_mixer(g, L, p) : gdn_mixer(g, L, p));
        TRY(fused_add_rmsnorm_cuda(g->x, g->h, g->y, L->post_norm, n, H, eps, 1.0f, st));
        TRY(gpu_moe_block(g, L, n));
    }
    return fused_add_rmsnorm_cuda(g->x, g->h, g->y, g->final_norm, n, H, eps, 1.0f, st);
}

/* Validate an item; 0 or the item's error. rows: the step's rows so far. */
static int check_item(const struct gpu_model *g, const struct gpu_item *it, const bool *seen,
                      int rows)
{
    if (it->slot < 0 || it->slot >= g->o.n_slots || seen[it->slot])
        return ERR_INVAL;
    if (g->pos[it->slot] < 0 || g->pos[it->slot] != it->pos || g->win_slot == it->slot)
        return ERR_STATE;
    if (it->n < 1 || !it->tokens || (it->snap && (g->n_snap == 0 || it->n > g->spec_k + 1)))
        return ERR_INVAL;
    for (int t = 0; t < it->n; t++)
        if (it->tokens[t] < 0 || it->tokens[t] >= g->V)
            return ERR_INVAL;
    const int64_t end = (int64_t)it->pos + it->n;
    if (end > g->o.max_model_len || (int64_t)rows + it->n > g->R)
        return ERR_FULL;
    const int64_t need = CEIL_DIV(end, (int64_t)g->o.block_tokens);
    if (it->blocks) {
        if (it->n_blocks < need || it->n_blocks > g->bps)
            return ERR_FULL;
        for (int b = 0; b < it->n_blocks; b++)
            if (it->blocks[b] >= (uint32_t)g->o.kv_blocks)
                return ERR_RANGE;
    } else if (gpu_default_block(g, it->slot, g->bps - 1) >= g->o.kv_blocks) {
        return ERR_FULL; // no default blocks for this slot: the caller must pass a table
    }
    if (g->o.state_in_pool && g->chunk[it->slot] < 0)
        return ERR_STATE;
    return 0;
}

/* Fill h_in for the valid items (rows item by item) with table stride ts. */
static void fill_inputs(struct gpu_model *g, const struct gpu_item *items, int n_items, int ts)
{
    const int bt = g->o.block_tokens;
    int32_t *hin = g->h_in;
    int r = 0, ni = 0;
    for (int i = 0; i < n_items; i++) {
        const struct gpu_item *it = &items[i];
        if (it->rc != 0)
            continue;
        int32_t *gi = hin + gpu_in_items(g) + (int64_t)ni++ * GDN_SEQ_ITEM_INTS;
        gi[0] = r;
        gi[1] = it->n;
        gi[2] = g->o.state_in_pool ? g->chunk[it->slot] : it->slot; // where its GDN state is
        gi[3] = it->snap ? 0 : -1; // the one open window's rows: snapshots 0 .. n-1
        int32_t *as = hin + gpu_in_aseqs(g) + (int64_t)(ni - 1) * 4; // struct attn_prefill_seq
        as[0] = r;      // block table row: the item's first row
        as[1] = r;      // first query row
        as[2] = it->n;
        as[3] = it->pos;
        int32_t *tab0 = hin + gpu_in_table(g) + (int64_t)r * ts;
        /* in the pool a block holds kv_sub sub-blocks (each attention layer's K and V): the
         * kernels, which address a layer's rows from its first sub-block, take block x kv_sub */
        for (int b = 0; b < ts; b++)
            tab0[b] = gpu_table_entry(g, it->slot, it->blocks, it->n_blocks, b);
        for (int t = 0; t < it->n; t++, r++) {
            const int p = it->pos + t;
            if (t > 0)
                memcpy(hin + gpu_in_table(g) + (int64_t)r * ts, tab0, sizeof(int32_t) * (size_t)ts);
            hin[gpu_in_tokens(g) + r] = it->tokens[t];
            hin[gpu_in_pos(g) + r] = p;
            hin[gpu_in_slots(g) + r] = it->slot;
            hin[gpu_in_map(g) + r] = tab0[p / bt] * bt + p % bt;
            hin[gpu_in_lens(g) + r] = p + 1;
        }
    }
}

/* lm_head (+ argmax, + device sampling) for the nl rows listed in h_rows / h_item, in batches
 * of lrows; copies each logits row to its item (row k of the item's n when all_logits, else the
 * last row). The rows of items that sample on the device come first (gpu_step_run), so in each
 * batch they are rows 0 .. ns-1 of g->logits, the rows gpu_sample_run takes. */
static int emit_logits(struct gpu_model *g, struct gpu_item *items, const int *row_start, int nl)
{
    const int64_t V = g->V, H = g->H;
    for (int j0 = 0; j0 < nl; j0 += g->lrows) {
        const int nb = nl - j0 < g->lrows ? nl - j0 : g->lrows;
        int want_argmax = 0, want_logits = 0, ns = 0;
        for (int j = 0; j < nb; j++) {
            const struct gpu_item *it = &items[g->h_item[j0 + j]];
            if (!it->logits && it->sample && g->sampler)
                g->h_sreq[ns++] = *it->sample;
            TRY(gpu_cu(cudaMemcpyAsync(g->xl + j * H, g->x + (int64_t)g->h_rows[j0 + j] * H,
                                   sizeof(float) * (size_t)H, cudaMemcpyDeviceToDevice,
                                   g->stream)));
            want_argmax |= it->argmax != NULL;
            want_logits |= it->logits != NULL;
        }
        TRY(gpu_lm_head(g, g->logits, g->xl, nb));
        if (want_argmax) {
            TRY(argmax_cuda(g->argmax_ids, g->logits, nb, g->V, g->argmax_ws, g->stream));
            TRY(gpu_cu(cudaMemcpyAsync(g->h_argmax, g->argmax_ids, sizeof(int32_t) * (size_t)nb,
                                   cudaMemcpyDeviceToHost, g->stream)));
        }
        if (want_logits)
            TRY(gpu_cu(cudaMemcpyAsync(g->h_logits, g->logits, sizeof(float) * (size_t)(nb * V),
                                   cudaMemcpyDeviceToHost, g->stream)));
        TRY(gpu_cu(cudaStreamSynchronize(g->stream)));
        if (ns > 0) /* penalties in place on rows 0 .. ns-1; waits for the stream */
            TRY(gpu_sample_run(g->sampler, g->logits, ns, g->h_sreq, g->h_stok, NULL, g->stream));
        for (int j = 0; j < nb; j++) {
            const int i = g->h_item[j0 + j];
            struct gpu_item *it = &items[i];
            if (!it->logits && it->sample && g->sampler && it->token)
                *it->token = g->h_stok[j]; /* j < ns: the sampled rows lead the batch */
            const int k = g->h_rows[j0 + j] - row_start[i]; // row within the item
            if (it->logits) {
                float *dst = it->logits + (it->all_logits ? (int64_t)k * V : 0);
                memcpy(dst, g->h_logits + (int64_t)j * V, sizeof(float) * (size_t)V);
            }
            if (it->argmax && k == it->n - 1)
                *it->argmax = g->h_argmax[j];
        }
    }
    return 0;
}

int gpu_step_run(struct gpu_model *g, struct gpu_item *items, int n_items)
{
    const int B = g->o.n_slots, bt = g->o.block_tokens;
    if (n_items < 0 || n_items > B)
        return ERR_INVAL;
    bool *seen = g->h_seen;
    memset(seen, 0, sizeof(bool) * (size_t)B);
    int rows = 0, ni = 0, max_end = 0, max_n = 0;
    int *row_start = g->h_start;
    for (int i = 0; i < n_items; i++) {
        struct gpu_item *it = &items[i];
        it->rc = check_item(g, it, seen, rows);
        row_start[i] = rows;
        if (it->rc != 0)
            continue;
        seen[it->slot] = true;
        rows += it->n;
        ni++;
        if (it->pos + it->n > max_end)
            max_end = it->pos + it->n;
        if (it->n > max_n)
            max_n = it->n;
    }
    if (ni == 0)
        return 0;
    /* every item one token: the captured graph of ni rows; one item of 2..n_snap rows (a
     * verify window): its window graph; both with the full-width table; else eager with a
     * table only as wide as this step needs */
    cudaGraphExec_t graph = NULL;
    if (g->use_graphs && max_n == 1)
        graph = g->graphs[rows];
    else if (g->use_graphs && ni == 1 && g->wgraphs && max_n <= g->n_snap)
        graph = g->wgraphs[max_n];
    struct gpu_pass p;
    if (graph)
        gpu_pass_main(g, &p, rows, ni, g->bps, g->o.max_model_len);
    else
        gpu_pass_main(g, &p, rows, ni, (int)CEIL_DIV(max_end, bt), max_end);
    p.max_n = max_n;
    fill_inputs(g, items, n_items, p.ts);
    TRY(gpu_cu(cudaMemcpyAsync(g->d_in, g->h_in,
                           sizeof(int32_t) * (size_t)(gpu_in_table(g) + (int64_t)rows * p.ts),
                           cudaMemcpyHostToDevice, g->stream)));
    if (graph)
        TRY(gpu_cu(cudaGraphLaunch(graph, g->stream)));
    else
        TRY(gpu_run_layers(g, &p));
    /* rows that need the lm_head: first the last rows of items sampled on the device, then the
     * others (emit_logits relies on that order) */
    int nl = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_items; i++) {
            const struct gpu_item *it = &items[i];
            const bool dev = !it->logits && it->sample && g->sampler;
            if (it->rc != 0 || (!it->logits && !it->argmax && !dev) || dev != (pass == 0))
                continue;
            for (int t = it->logits && it->all_logits ? 0 : it->n - 1; t < it->n; t++) {
                g->h_rows[nl] = row_start[i] + t;
                g->h_item[nl++] = i;
            }
        }
    if (nl > 0)
        TRY(emit_logits(g, items, row_start, nl));
    return 0;
}

void gpu_fail_slot(struct gpu_model *g, int slot, int rc, const char *where)
{
    /* nothing may still read the pinned inputs or write the state when the caller goes on */
    (void)cudaStreamSynchronize(g->stream);
    LOG_ERR("gpu_slot_failed", "slot=%d where=%s status=%s note=\"state unknown: slot closed\"",
            slot, where, err_str(rc));
    gpu_model_seq_close(g, slot);
}

int gpu_model_step(struct gpu_model *g, struct gpu_item *items, int n_items)
{
    if (n_items < 0 || n_items > g->o.n_slots)
        return ERR_INVAL;
    for (int i = 0; i < n_items; i++)
        if (items[i].snap)
            return ERR_INVAL; // snapshots are for speculative windows (gpu_spec.c) only
    int rc = gpu_step_run(g, items, n_items);
    if (rc == 0 && g->spec_k > 0)
        rc = gpu_spec_after_step(g, items, n_items); // keeps the MTP K/V complete
    if (rc == 0)
        rc = gpu_cu(cudaStreamSynchronize(g->stream));
    if (rc < 0) {
        /* a whole-step failure after validation: the run items' GDN state (and MTP entries) may
         * be half advanced while their positions are not, so their slots are closed (later
         * steps get ERR_STATE, not wrong logits); the caller fails those sequences anyway */
        for (int i = 0; i < n_items; i++)
            if (items[i].rc == 0)
                gpu_fail_slot(g, items[i].slot, rc, "step");
        return rc;
    }
    for (int i = 0; i < n_items; i++)
        if (items[i].rc == 0)
            g->pos[items[i].slot] += items[i].n;
    return 0;
}
