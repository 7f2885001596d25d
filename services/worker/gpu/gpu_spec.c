/* gpu_spec: MTP speculative decoding on the device (MODEL.md §6), the same bookkeeping as the
 * CPU engine's wk_spec_cpu.c. Per slot: the MTP entries known but not yet run (token after
 * position p, the main model's final-normed hidden at p) and the hidden of the last run
 * position (its next token arrives with the next step or window). Plain steps run the MTP over
 * every entry they complete (so its K/V never has holes); a window drafts k tokens (one MTP
 * pass over the pending entries, then k-1 one-row feedback passes, the argmax fed back on the
 * device), runs [x, drafts] as one main-model item with all logits and GDN snapshots, and the
 * commit restores the snapshot after the last kept row. */
#include "gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argmax.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "embed.h"
#include "fused_add_rmsnorm.h"
#include "gemv.h"
#include "kv_write.h"
#include "rmsnorm.h"

#define TRY(call)              \
    do {                       \
        int rc_ = (call);      \
        if (rc_ < 0)           \
            return rc_;        \
    } while (0)

struct spec_slot {
    bool have_h;                          // h_last holds the hidden of position pos-1
    int32_t pend_tok[GPU_SPEC_MAX + 1];   // pending entries: tokens
    int pend_pos0, pend_n;                //  at positions pend_pos0 .. +pend_n-1
};

/* one row of an MTP pass, staged on the host */
struct mrow {
    int32_t tok;
    int pos, slot;
    const uint32_t *blocks; // NULL = the slot's default blocks
    int n_blocks;
};

struct gpu_spec {
    struct gpu_mtp_w w;
    int K, MR;               // drafts per round; MTP rows one step may stage
    int32_t *d_min, *h_min;  // tokens | pos | map | lens (MR each) | table (MR x bps)
    struct mrow *rows;       // (MR) host staging
    float *cat;              // (R, 2H) [normed embedding | normed hidden]
    float *hid;              // (MR, H) hidden inputs of the staged rows
    float *h_last;           // (n_slots, H)
    float *pend_hid;         // (n_slots, K+1, H)
    float *win_hid;          // (K+1, H) the open window's hidden rows
    struct spec_slot *sl;    // (n_slots)
    int win_pos, win_k;
    int32_t win_tok[GPU_SPEC_MAX + 1]; // x, drafts
};

static int64_t in_pos(const struct gpu_spec *s) { return s->MR; }
static int64_t in_map(const struct gpu_spec *s) { return 2 * (int64_t)s->MR; }
static int64_t in_lens(const struct gpu_spec *s) { return 3 * (int64_t)s->MR; }
static int64_t in_table(const struct gpu_spec *s) { return 4 * (int64_t)s->MR; }

int gpu_spec_create(struct gpu_model *g, const struct model *m, char *err, size_t errlen)
{
    if (!m->has_mtp) {
        snprintf(err, errlen, "speculation: the checkpoint has no MTP head (mtp.* tensors)");
        return ERR_UNSUPPORTED;
    }
    struct gpu_spec *s = xcalloc(1, sizeof *s);
    g->spec = s;
    const int K = g->o.spec_k, S = g->o.n_slots, H = g->H;
    s->K = K;
    s->MR = g->R + S * (K + 1);
    int rc = gpu_upload_mtp(g, m, &s->w, err, errlen);
    if (rc < 0)
        return rc;
    /* GDN snapshots for the one open window (win_slot): the state after each of its K+1 rows */
    g->n_snap = K + 1;
    for (int l = 0; l < g->cfg.n_layers; l++) {
        struct gpu_layer *L = &g->layers[l];
        if (L->type != LAYER_LINEAR_ATTN)
            continue;
        L->conv_snap = gpu_dev_alloc(
            g, sizeof(float) * (size_t)g->n_snap * (size_t)g->cd * (size_t)(g->kc - 1),
            &g->mem.gdn_state);
        L->ssm_snap = gpu_dev_alloc(
            g, sizeof(float) * (size_t)g->n_snap * (size_t)g->hv * GPU_GDN_D * GPU_GDN_D,
            &g->mem.gdn_state);
        if (!L->conv_snap || !L->ssm_snap)
            goto nomem;
    }
    int64_t *a = &g->mem.activations;
    s->cat = gpu_dev_alloc(g, sizeof(float) * (size_t)g->R * 2 * (size_t)H, a);
    s->hid = gpu_dev_alloc(g, sizeof(float) * (size_t)s->MR * (size_t)H, a);
    s->h_last = gpu_dev_alloc(g, sizeof(float) * (size_t)S * (size_t)H, a);
    s->pend_hid = gpu_dev_alloc(g, sizeof(float) * (size_t)S * (size_t)(K + 1) * (size_t)H, a);
    s->win_hid = gpu_dev_alloc(g, sizeof(float) * (size_t)(K + 1) * (size_t)H, a);
    const size_t n_in = (size_t)in_table(s) + (size_t)s->MR * (size_t)g->bps;
    s->d_min = gpu_dev_alloc(g, sizeof(int32_t) * n_in, a);
    if (!s->cat || !s->hid || !s->h_last || !s->pend_hid || !s->win_hid || !s->d_min)
        goto nomem;
    if (cudaMallocHost((void **)&s->h_min, sizeof(int32_t) * n_in) != cudaSuccess) {
        (void)cudaGetLastError();
        s->h_min = NULL;
        goto nomem;
    }
    s->rows = xcalloc((size_t)s->MR, sizeof *s->rows);
    s->sl = xcalloc((size_t)S, sizeof *s->sl);
    g->spec_k = K;
    return 0;
nomem:
    snprintf(err, errlen, "speculation buffers: cudaMalloc failed");
    return ERR_NOMEM;
}

int gpu_spec_alloc_kv(struct gpu_model *g, char *err, size_t errlen)
{
    struct gpu_spec *s = g->spec;
    if (g->arena) { /* states in the pool: the MTP layer's K and V are the last sub-blocks */
        const int64_t row = (int64_t)g->hkv * g->hd * kv_dtype_bytes(g->kv_dtype);
        s->w.layer.k_cache = (char *)g->arena + (int64_t)(2 * g->n_attn) * g->o.block_tokens * row;
        s->w.layer.v_cache =
            (char *)g->arena + (int64_t)(2 * g->n_attn + 1) * g->o.block_tokens * row;
        return 0;
    }
    const size_t kv_bytes = (size_t)kv_dtype_bytes(g->kv_dtype) * (size_t)g->o.kv_blocks *
                            (size_t)g->o.block_tokens * (size_t)g->hkv * (size_t)g->hd;
    s->w.layer.k_cache = gpu_dev_alloc(g, kv_bytes, &g->mem.kv_pool);
    s->w.layer.v_cache = gpu_dev_alloc(g, kv_bytes, &g->mem.kv_pool);
    if (!s->w.layer.k_cache || !s->w.layer.v_cache) {
        snprintf(err, errlen, "speculation: the MTP layer's K/V: cudaMalloc failed");
        return ERR_NOMEM;
    }
    return 0;
}

void gpu_spec_destroy(struct gpu_model *g)
{
    struct gpu_spec *s = g->spec;
    if (!s)
        return;
    if (s->h_min)
        cudaFreeHost(s->h_min);
    free(s->rows);
    free(s->sl);
    free(s);
    g->spec = NULL;
}

void gpu_spec_reset(struct gpu_model *g, int slot)
{
    struct gpu_spec *s = g->spec;
    s->sl[slot].have_h = false;
    s->sl[slot].pend_n = 0;
    if (g->win_slot == slot)
        g->win_slot = -1;
}

int gpu_model_spec_k(const struct gpu_model *g) { return g->spec_k; }

struct gpu_layer *gpu_spec_layer(struct gpu_model *g)
{
    return g->spec ? &g->spec->w.layer : NULL;
}

static int d2d(struct gpu_model *g, float *dst, const float *src, int64_t n_floats)
{
    if (n_floats <= 0)
        return 0;
    return gpu_cu(cudaMemcpyAsync(dst, src, sizeof(float) * (size_t)n_floats,
                                  cudaMemcpyDeviceToDevice, g->stream));
}

/* Stage n rows into h_min with table stride ts and copy them to the device. */
static int stage_rows(struct gpu_model *g, int n, int ts)
{
    struct gpu_spec *s = g->spec;
    const int bt = g->o.block_tokens;
    int32_t *h = s->h_min;
    for (int r = 0; r < n; r++) {
        const struct mrow *w = &s->rows[r];
        int32_t *tab = h + in_table(s) + (int64_t)r * ts;
        for (int b = 0; b < ts; b++)
            tab[b] = gpu_table_entry(g, w->slot, w->blocks, w->n_blocks, b);
        h[r] = w->tok;
        h[in_pos(s) + r] = w->pos;
        h[in_map(s) + r] = tab[w->pos / bt] * bt + w->pos % bt;
        h[in_lens(s) + r] = w->pos + 1;
    }
    const size_t bytes = sizeof(int32_t) * (size_t)in_table(s);
    TRY(gpu_cu(cudaMemcpyAsync(s->d_min, h, bytes, cudaMemcpyHostToDevice, g->stream)));
    return gpu_cu(cudaMemcpyAsync(s->d_min + in_table(s), h + in_table(s),
                                  sizeof(int32_t) * (size_t)n * (size_t)ts,
                                  cudaMemcpyHostToDevice, g->stream));
}

/* The MTP head over staged rows r0 .. r0+n-1 (n <= R): token ids tokens (device), hidden
 * inputs hid (n, H). Writes the MTP K/V of those positions; the normed output lands in g->x,
 * except with kv_only: then the pass stops once the K/V are stored (a row's K/V depend on its
 * own inputs only; the upkeep after a plain step reads no output, drafting always does). */
static int mtp_pass(struct gpu_model *g, const int32_t *tokens, const float *hid, int r0, int n,
                    int ts, int max_len, bool kv_only)
{
    struct gpu_spec *s = g->spec;
    cudaStream_t st = g->stream;
    const int H = g->H;
    const float eps = g->cfg.rms_eps;
    if (n < 1 || n > g->R)
        return ERR_INVAL;
    const struct gpu_pass p = { n, 0, ts, max_len, tokens, s->d_min + in_pos(s) + r0,
                                s->d_min + in_map(s) + r0, s->d_min + in_lens(s) + r0,
                                s->d_min + in_table(s) + (int64_t)r0 * ts, NULL, NULL, 0 };
    const size_t row = sizeof(float) * (size_t)H;
    TRY(embed_cuda(g->h, g->embed, tokens, n, H, g->V, st));
    TRY(rmsnorm_cuda(g->y, g->h, s->w.norm_emb, n, H, eps, 1.0f, st));
    TRY(gpu_cu(cudaMemcpy2DAsync(s->cat, 2 * row, g->y, row, row, (size_t)n,
                                 cudaMemcpyDeviceToDevice, st)));
    TRY(rmsnorm_cuda(g->y, hid, s->w.norm_hid, n, H, eps, 1.0f, st));
    TRY(gpu_cu(cudaMemcpy2DAsync(s->cat + H, 2 * row, g->y, row, row, (size_t)n,
                                 cudaMemcpyDeviceToDevice, st)));
    TRY(gpu_linear(g, g->h, &s->w.fc, s->cat, n));
    struct gpu_layer *L = &s->w.layer;
    TRY(rmsnorm_cuda(g->x, g->h, L->in_norm, n, H, eps, 1.0f, st));
    if (kv_only)
        return gpu_attn_inputs(g, L, &p);
    TRY(gpu_attn_mixer(g, L, &p));
    TRY(fused_add_rmsnorm_cuda(g->x, g->h, g->y, L->post_norm, n, H, eps, 1.0f, st));
    TRY(gpu_moe_block(g, L, n));
    return fused_add_rmsnorm_cuda(g->x, g->h, g->y, s->w.norm, n, H, eps, 1.0f, st);
}

/* Stage the slot's pending entries (hidden rows into hid from row r), then the entry (tok,
 * h_last) when the slot has one; returns the rows staged. */
static int stage_pending(struct gpu_model *g, int slot, int32_t tok, int pos, int r,
                         const uint32_t *blocks, int n_blocks, int *rc)
{
    struct gpu_spec *s = g->spec;
    struct spec_slot *q = &s->sl[slot];
    const int64_t H = g->H;
    int n = 0;
    for (int j = 0; j < q->pend_n; j++, n++)
        s->rows[r + n] = (struct mrow){ q->pend_tok[j], q->pend_pos0 + j, slot, blocks, n_blocks };
    *rc = d2d(g, s->hid + (int64_t)r * H, s->pend_hid + (int64_t)slot * (s->K + 1) * H,
              (int64_t)q->pend_n * H);
    if (*rc == 0 && q->have_h) {
        s->rows[r + n] = (struct mrow){ tok, pos - 1, slot, blocks, n_blocks };
        *rc = d2d(g, s->hid + (int64_t)(r + n) * H, s->h_last + (int64_t)slot * H, H);
        n++;
    }
    q->pend_n = 0;
    q->have_h = false;
    return n;
}

int gpu_spec_after_step(struct gpu_model *g, const struct gpu_item *items, int n_items)
{
    struct gpu_spec *s = g->spec;
    const int64_t H = g->H;
    int n = 0, max_len = 1, rc = 0;
    for (int i = 0; i < n_items; i++) {
        const struct gpu_item *it = &items[i];
        if (it->rc != 0)
            continue;
        const int r0 = g->h_start[i];
        n += stage_pending(g, it->slot, it->tokens[0], it->pos, n, it->blocks, it->n_blocks, &rc);
        TRY(rc);
        for (int t = 0; t + 1 < it->n; t++)
            s->rows[n + t] = (struct mrow){ it->tokens[t + 1], it->pos + t, it->slot, it->blocks,
                                            it->n_blocks };
        TRY(d2d(g, s->hid + (int64_t)n * H, g->x + (int64_t)r0 * H, (int64_t)(it->n - 1) * H));
        n += it->n - 1;
        TRY(d2d(g, s->h_last + (int64_t)it->slot * H, g->x + (int64_t)(r0 + it->n - 1) * H, H));
        s->sl[it->slot].have_h = true;
        if (it->pos + it->n - 1 > max_len)
            max_len = it->pos + it->n - 1; // the last staged position is pos+n-2
    }
    if (n == 0)
        return 0;
    const int ts = (int)CEIL_DIV(max_len, g->o.block_tokens);
    TRY(stage_rows(g, n, ts));
    for (int r0 = 0; r0 < n; r0 += g->R) {
        const int nr = n - r0 < g->R ? n - r0 : g->R;
        TRY(mtp_pass(g, s->d_min + r0, s->hid + (int64_t)r0 * H, r0, nr, ts, max_len,
                     g->disp.mtp_upkeep_kv_only));
    }
    return 0;
}

/* The device part of a window (the checks passed): drafting, then the verify item. Any failure
 * leaves the slot's MTP entries consumed and its GDN state possibly advanced. */
static int window_run(struct gpu_model *g, int slot, int pos, int32_t x, int k,
                      const uint32_t *blocks, int n_blocks, int32_t *drafts, float *logits)
{
    struct gpu_spec *s = g->spec;
    const int64_t H = g->H;
    /* drafting: the pending entries and (x, h_last) in one pass, then k-1 feedback rows at
     * pos, pos+1, ... whose token is the previous argmax (on the device) */
    int rc = 0;
    const int n1 = stage_pending(g, slot, x, pos, 0, blocks, n_blocks, &rc);
    TRY(rc);
    for (int j = 1; j < k; j++)
        s->rows[n1 - 1 + j] = (struct mrow){ 0, pos - 1 + j, slot, blocks, n_blocks };
    const int max_len = pos + k - 1; // last draft row's position is pos+k-2
    const int ts = (int)CEIL_DIV(max_len, g->o.block_tokens);
    TRY(stage_rows(g, n1 + k - 1, ts));
    TRY(mtp_pass(g, s->d_min, s->hid, 0, n1, ts, max_len, false));
    const float *y = g->x + (int64_t)(n1 - 1) * H;
    for (int j = 0; j < k; j++) {
        TRY(gemv_cuda(g->logits, &g->lm_head, 0, y, 1, g->stream));
        TRY(argmax_cuda(g->argmax_ids + j, g->logits, 1, g->V, g->argmax_ws, g->stream));
        if (j + 1 == k)
            break;
        TRY(d2d(g, s->hid, y, H)); // the MTP output feeds the next draft step
        TRY(mtp_pass(g, g->argmax_ids + j, s->hid, n1 + j, 1, ts, max_len, false));
        y = g->x;
    }
    TRY(gpu_cu(cudaMemcpyAsync(g->h_argmax, g->argmax_ids, sizeof(int32_t) * (size_t)k,
                               cudaMemcpyDeviceToHost, g->stream)));
    TRY(gpu_cu(cudaStreamSynchronize(g->stream)));
    s->win_tok[0] = x;
    for (int j = 0; j < k; j++)
        drafts[j] = s->win_tok[j + 1] = g->h_argmax[j];
    /* the verify window: one item of k+1 rows, all logits, GDN snapshots after every row */
    struct gpu_item it = { .slot = slot, .tokens = s->win_tok, .n = k + 1, .pos = pos,
                           .blocks = blocks, .n_blocks = n_blocks, .logits = logits,
                           .all_logits = 1, .snap = 1 };
    TRY(gpu_step_run(g, &it, 1));
    if (it.rc != 0)
        return it.rc; // cannot happen: checked by the caller (and max_rows >= spec_k + 1)
    TRY(d2d(g, s->win_hid, g->x, (int64_t)(k + 1) * H));
    return gpu_cu(cudaStreamSynchronize(g->stream));
}

int gpu_model_spec_window(struct gpu_model *g, int slot, int pos, int32_t x, int k,
                          const uint32_t *blocks, int n_blocks, int32_t *drafts, float *logits)
{
    struct gpu_spec *s = g->spec;
    if (!s || slot < 0 || slot >= g->o.n_slots || k < 1 || k > s->K || x < 0 || x >= g->V ||
        !drafts || !logits)
        return ERR_INVAL;
    struct spec_slot *q = &s->sl[slot];
    if (g->pos[slot] < 1 || g->pos[slot] != pos || g->win_slot >= 0 || !q->have_h)
        return ERR_STATE;
    const int64_t end = (int64_t)pos + k + 1;
    if (end > g->o.max_model_len)
        return ERR_FULL;
    if (blocks) {
        if (n_blocks < CEIL_DIV(end, (int64_t)g->o.block_tokens) || n_blocks > g->bps)
            return ERR_FULL;
        for (int b = 0; b < n_blocks; b++)
            if (blocks[b] >= (uint32_t)g->o.kv_blocks)
                return ERR_RANGE;
    } else if (gpu_default_block(g, slot, g->bps - 1) >= g->o.kv_blocks) {
        return ERR_FULL;
    }
    const int rc = window_run(g, slot, pos, x, k, blocks, n_blocks, drafts, logits);
    if (rc < 0) {
        gpu_fail_slot(g, slot, rc, "spec_window");
        return rc;
    }
    g->win_slot = slot;
    s->win_pos = pos;
    s->win_k = k;
    return 0;
}

/* The device part of a commit: the GDN state after window row a (snapshot a), the MTP entries. */
static int commit_run(struct gpu_model *g, int slot, int a)
{
    struct gpu_spec *s = g->spec;
    const int64_t H = g->H;
    const size_t cw = sizeof(float) * (size_t)g->cd * (size_t)(g->kc - 1);
    const size_t sw = sizeof(float) * (size_t)g->hv * GPU_GDN_D * GPU_GDN_D;
    for (int l = 0; l < g->cfg.n_layers; l++) {
        struct gpu_layer *L = &g->layers[l];
        if (L->type != LAYER_LINEAR_ATTN)
            continue;
        TRY(gpu_cu(cudaMemcpyAsync((char *)L->conv_state + gpu_state_offset(g, slot, cw),
                                   (const char *)L->conv_snap + cw * (size_t)a, cw,
                                   cudaMemcpyDeviceToDevice, g->stream)));
        TRY(gpu_cu(cudaMemcpyAsync((char *)L->ssm + gpu_state_offset(g, slot, sw),
                                   (const char *)L->ssm_snap + sw * (size_t)a, sw,
                                   cudaMemcpyDeviceToDevice, g->stream)));
    }
    /* positions pos .. pos+a are kept; the token after pos+i is draft i for i < a, the one after
     * pos+a comes with the next step or window */
    struct spec_slot *q = &s->sl[slot];
    for (int i = 0; i < a; i++)
        q->pend_tok[i] = s->win_tok[i + 1];
    q->pend_pos0 = s->win_pos;
    q->pend_n = a;
    TRY(d2d(g, s->pend_hid + (int64_t)slot * (s->K + 1) * H, s->win_hid, (int64_t)a * H));
    TRY(d2d(g, s->h_last + (int64_t)slot * H, s->win_hid + (int64_t)a * H, H));
    q->have_h = true;
    return gpu_cu(cudaStreamSynchronize(g->stream));
}

int gpu_model_spec_commit(struct gpu_model *g, int slot, int a)
{
    struct gpu_spec *s = g->spec;
    if (!s || slot < 0 || g->win_slot != slot || a < 0 || a > s->win_k)
        return ERR_STATE;
    g->win_slot = -1;
    const int rc = commit_run(g, slot, a);
    if (rc < 0) {
        gpu_fail_slot(g, slot, rc, "spec_commit");
        return rc;
    }
    g->pos[slot] = s->win_pos + a + 1;
    return 0;
}
