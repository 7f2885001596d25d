/* gpu_dispatch: which kernel runs each linear layer, expert block and attention of a step, by
 * rows and weight format. The table is data: gpu_dispatch_init fills it once, gpu_dispatch_log
 * prints it, and gpu_linear / gpu_experts / the attention mixer read it on every call.
 *
 * Default thresholds (rows from which the many-row path runs), per weight format, from the H200
 * sweep in docs/PERF.md ("many-row dispatch"): below them the GEMV / moe_expert kernels, which
 * stream each weight once per call, are faster; from them on the tensor-core GEMMs are. */
#include "gpu_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "attn_decode.h"
#include "attn_prefill.h"
#include "attn_prep.h"
#include "common/err.h"
#include "common/log.h"
#include "gdn_seq.h"
#include "gemv.h"
#include "moe_expert.h"
#include "moe_grouped.h"
#include "moe_route.h"

/* index enum kw_fmt: -, bf16, fp8, nvfp4 (bench_linear on the H200, docs/PERF.md) */
static const int DEFAULT_GEMM_ROWS[4] = { 0, 9, 9, 24 };
/* the lm_head's split GEMM against the GEMV (bench_linear lm_head, H200 2026-12-01; bf16 again
 * on 2026-12-04 with the split GEMM reading a bf16 weight once: 262 against 390 us at 2 rows, 267
 * against 575 at 4, the GEMV 230 against 257 at 1). -DLM_ROWS_BF16=4: the threshold before. */
#ifndef LM_ROWS_BF16
#define LM_ROWS_BF16 2
#endif
static const int DEFAULT_LM_ROWS[4] = {0, LM_ROWS_BF16, 9, 32};
/* expert stacks: moe_grouped from these rows on. With 16-row tiles for few slots per expert
 * (bench_linear experts_t16, H200 2026-12-01: crossovers at 24 / 48 rows for bf16 / fp8, and 9
 * for nvfp4 with the pipelined kernel: 123 vs 144 us at 9 rows, 120 vs 102 us at 8) and with
 * 64-row tiles only (experts: 96 / 96 / 64), for grouped_small = -1 */
static const int DEFAULT_GROUPED_ROWS[4] = { 0, 24, 48, 9 };
static const int DEFAULT_GROUPED_ROWS_T64[4] = { 0, 96, 96, 64 };
/* 16-row tiles while slots <= this x max(experts, DEFAULT_GROUPED_SMALL_MIN_EXPERTS): faster
 * than 64-row tiles at every row count of the sweep up to 512 rows (16 slots per expert of 256 at
 * top-8; nvfp4 pipelined 326 vs 699 us at 64 rows, 540 vs 818 at 512, H200 2026-12-01) and
 * slower from 1,024 rows (919 vs 861); the shared expert (a stack of 1) likewise up to 512 rows
 * (34 vs 58 us at 64 rows, 48 vs 60 at 256, 69 vs 68 at 512, 120 vs 90 at 1,024), hence the
 * floor of 32 experts: 512 slots */
#define DEFAULT_GROUPED_SMALL 16
#define DEFAULT_GROUPED_SMALL_MIN_EXPERTS 32
/* NVFP4 dense layers on the pipelined W4A16 tiles (LINEAR_PATH_TILES) from 9 to 32 rows: 8192 x
 * 2048 at 16 rows 18.2 us vs 33.9 (GEMV), at 24 26.7 vs 39.5 (dequant + cuBLASLt), at 32 26.1
 * vs 36.6; at 8 rows 17.8 vs 16.3 (GEMV), at 64 40.0 vs 38.6 (cuBLASLt), H200 2026-12-01 */
#define DEFAULT_DENSE_TILES_MIN 9
#define DEFAULT_DENSE_TILES_MAX 32
static const int DEFAULT_ROUTER_ROWS = 9;
/* GDN items of at least this many rows take the chunked recurrence (64-row chunks as matrix
 * products) instead of the token-serial kernel: bench_kernels gdn, H200 2026-12-01, one item of
 * the model's heads: chunked / serial 1.30 at 128 rows, 0.99 at 256 and 512, 0.76 at 2,048
 * ("threshold gdn_chunk many_rows_from=256") */
#define DEFAULT_GDN_CHUNK_ROWS 256
/* passes of at least 2 items of up to 16 rows attend through attn_prefill_split (bench_attn on
 * the H200, 16 x 256 heads, 2 kv heads: 8 sequences at 4,096 72 us against attn_decode's 103, 64
 * at 2,048 158 against 315); one sequence stays on attn_decode (2,048: 17 us against the split
 * form's 39, whose 64 parts of one key tile each are latency; 32,768: 91 against 103) */
#define DEFAULT_ATTN_SPLIT_ROWS 16
#define DEFAULT_ATTN_SPLIT_ITEMS 2
/* the GDN conv inside the recurrence's launch for one-row passes (docs/PERF.md, nineteenth
 * session); -DGDN_CONV_FUSED=0 builds the two launches (tests/gpu/measure.sh convab) */
#ifndef GDN_CONV_FUSED
#define GDN_CONV_FUSED 1
#endif
/* the folded shared expert's gate/up before the routed experts' wait (docs/PERF.md, nineteenth
 * session); -DMOE_SH_EARLY=0 builds the launches that wait first (tests/gpu/measure.sh shab) */
#ifndef MOE_SH_EARLY
#define MOE_SH_EARLY 1
#endif

/* the MTP upkeep after a plain step stops once the MTP K/V are stored (no attention, MoE or
 * final norm: nothing reads that output; docs/PERF.md, twentieth session); -DMTP_UPKEEP_KV_ONLY=0
 * builds the whole pass */
#ifndef MTP_UPKEEP_KV_ONLY
#define MTP_UPKEEP_KV_ONLY 1
#endif

static const char *const FMT_NAME[4] = { "?", "bf16", "fp8", "nvfp4" };

#define LIN_WS_BYTES ((size_t)32 << 20)
#define LIN_W_ELEMS_CAP ((int64_t)32 << 20) // decoded-weight scratch cap: 64 MiB of bf16

static int fmt_ok(int fmt) { return fmt >= KW_FMT_BF16 && fmt <= KW_FMT_NVFP4; }

/* widest cols and largest rows x cols of the dense weights (lm_head counts for cols only: it is
 * decoded in row chunks) */
static void dense_extent(const struct gpu_model *g, int *max_k, int64_t *max_el)
{
    *max_k = 2 * g->H; // the MTP head's fc (H, 2H)
    *max_el = 0;
    const struct kweight *lm = &g->lm_head;
    if (lm->cols > *max_k)
        *max_k = lm->cols;
    for (int l = 0; l < g->cfg.n_layers; l++) {
        const struct gpu_layer *L = &g->layers[l];
        const struct kweight *ws[] = { &L->qkv, &L->z, &L->b, &L->a, &L->out, &L->q, &L->k,
                                       &L->v, &L->o, &L->router, &L->sh_gate };
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            if (!ws[i]->data)
                continue;
            if (ws[i]->cols > *max_k)
                *max_k = ws[i]->cols;
            const int64_t el = (int64_t)ws[i]->rows * ws[i]->cols;
            if (el > *max_el)
                *max_el = el;
        }
    }
}

int gpu_dispatch_init(struct gpu_model *g, char *err, size_t errlen)
{
    struct gpu_dispatch *d = &g->disp;
    const int gm = g->o.gemm_min_rows, gr = g->o.grouped_min_rows, gs = g->o.grouped_small;
    d->grouped_small_per_expert = gs < 0 ? 0 : gs > 0 ? gs : DEFAULT_GROUPED_SMALL;
    const int *grouped = d->grouped_small_per_expert > 0 ? DEFAULT_GROUPED_ROWS
                                                         : DEFAULT_GROUPED_ROWS_T64;
    for (int f = 0; f < 4; f++) {
        d->gemm_rows[f] = gm < 0 ? INT_MAX : gm > 0 ? gm : DEFAULT_GEMM_ROWS[f];
        d->lm_rows[f] = gm < 0 ? INT_MAX : gm > 0 ? gm : DEFAULT_LM_ROWS[f];
        d->grouped_rows[f] = gr < 0 ? INT_MAX : gr > 0 ? gr : grouped[f];
    }
    d->router_rows = gm < 0 ? INT_MAX : gm > 0 ? gm : DEFAULT_ROUTER_ROWS;
    d->grouped_small_min_experts = DEFAULT_GROUPED_SMALL_MIN_EXPERTS;
    /* the pipelined 64-row NVFP4 tiles: 0.83-0.95 of the plain kernel's time at every point of
     * bench_linear's experts_tiles sweep (routed and shared, 16 to 4,096 rows), the same bits */
    d->grouped_t64 = MOE_GROUPED_TILE_ROWS | (g->o.grouped_pipe64 >= 0 ? MOE_GROUPED_PIPE64 : 0) |
                     (g->o.grouped_pipe64 == 0 || g->o.grouped_pipe64 == 2 ? MOE_GROUPED_PIPE64_COLS
                                                                           : 0);
    /* one launch for the few-row weights that read the same rows (GDN b + a, router + shared
     * gate): up to the wide kernel's token count */
    d->multi_rows = g->o.fuse < 0 ? 0 : GEMV_WIDE_MAX_TOK;
    d->attn_prep = g->o.fuse >= 0 && g->hd <= ATTN_PREP_MAX_HEAD_DIM;
    for (int f = 0; f < 4; f++) { /* moe_expert's rows, within its grid (rows x slots) */
        const int cap = 65535 / (g->K + 1), below = d->grouped_rows[f] - 1;
        d->fold_rows[f] = g->o.fuse < 0 ? 0 : below < cap ? below : cap;
    }
    d->fold_early = MOE_SH_EARLY && g->o.fuse >= 0;
    d->gdn_conv_fused = GDN_CONV_FUSED && g->o.fuse >= 0;
    d->mtp_upkeep_kv_only = MTP_UPKEEP_KV_ONLY;
    const int dt = g->o.dense_tiles;
    d->dense_tiles_min = gm > 0 ? gm : DEFAULT_DENSE_TILES_MIN;
    d->dense_tiles_max = gm < 0 || dt < 0 ? 0 : dt > 0 ? dt : gm == 0 ? DEFAULT_DENSE_TILES_MAX : 0;
    d->gdn_chunk_rows = g->o.gdn_chunk < 0 ? 0 : g->o.gdn_chunk > 0 ? g->o.gdn_chunk
                                                                     : DEFAULT_GDN_CHUNK_ROWS;
    /* items of more than 16 rows (prefill chunks) through attn_prefill; passes whose items have
     * at most 16 (decode rows, verify windows): the split flash form where it runs and takes
     * them (below), else row by row through attn_decode, so a window's rows attend as plain
     * steps do (the same kernel, the same partition of the keys) whatever the K/V dtype */
    d->attn_prefill_rows = g->o.prefill_attn < 0 ? INT_MAX : DEFAULT_ATTN_SPLIT_ROWS + 1;
    d->attn_split_rows =
        g->o.prefill_attn >= 0 && g->o.split_attn >= 0 && attn_prefill_split_ok(g->hd, g->kv_dtype)
            ? DEFAULT_ATTN_SPLIT_ROWS
            : 0;
    d->attn_split_items = DEFAULT_ATTN_SPLIT_ITEMS;
    /* the tensor-core kernels (bench_attn: MMA 2.5x the CUDA-core one at 2K-8K context; FLASH,
     * its cp.async / ldmatrix form, where it runs: bf16 caches, head dim 64 / 128 / 256 and its
     * shared memory within the device's limit; WGMMA, FLASH with its products on Hopper's
     * warpgroup MMA, where this build has sm_90a code and the device is 9.0) */
    d->attn_prefill_path = g->o.wgmma_attn >= 0 && attn_prefill_wgmma_ok(g->hd, g->kv_dtype)
                               ? ATTN_PREFILL_PATH_WGMMA
                           : attn_prefill_flash_ok(g->hd, g->kv_dtype) ? ATTN_PREFILL_PATH_FLASH
                           : g->hd % 16 == 0                           ? ATTN_PREFILL_PATH_MMA
                                                                       : ATTN_PREFILL_PATH_CORES;
    /* one-row items (batch-1 decode, verify windows row by row): the GQA tensor-core form where
     * it runs (bench_attn: a kv head's K/V read once for its query heads) */
    d->attn_decode_path = g->o.decode_attn < 0
                              ? ATTN_DECODE_PATH_CORES
                              : attn_decode_path_auto(g->hq, g->hkv, g->hd, g->kv_dtype);
    snprintf(d->why, sizeof d->why, "%s%s%s%s%s%s%s%s",
             gm == 0 && gr == 0 && gs == 0 && g->o.grouped_pipe64 == 0 && dt == 0 &&
                     g->o.gdn_chunk == 0 && g->o.fuse == 0
                 ? "measured defaults (docs/PERF.md)"
                 : "", g->o.fuse != 0 ? " fuse option" : "",
             gm != 0 ? " gemm_min_rows option" : "", gr != 0 ? " grouped_min_rows option" : "",
             gs != 0 ? " grouped_small option" : "",
             g->o.grouped_pipe64 != 0 ? " grouped_pipe64 option" : "",
             dt != 0 ? " dense_tiles option" : "", g->o.gdn_chunk != 0 ? " gdn_chunk option" : "");
    if (gm < 0)
        return 0; // no dense GEMM path: no cuBLASLt context
    int max_k;
    int64_t max_el;
    dense_extent(g, &max_k, &max_el);
    if (max_el > LIN_W_ELEMS_CAP)
        max_el = LIN_W_ELEMS_CAP;
    if (max_el < 16LL * max_k)
        max_el = 16LL * max_k;
    const int rows = g->R > g->lrows ? g->R : g->lrows;
    int rc = linear_ctx_create(&g->lin, rows, max_k, max_el, LIN_WS_BYTES);
    if (rc < 0) {
        snprintf(err, errlen, "linear GEMM context (%d rows x %d, %lld weight elements): %s",
                 rows, max_k, (long long)max_el, err_str(rc));
        return rc;
    }
    g->mem.dispatch += linear_ctx_bytes(g->lin);
    return 0;
}

void gpu_dispatch_destroy(struct gpu_model *g)
{
    linear_ctx_destroy(g->lin);
    g->lin = NULL;
}

/* `many` from rows[w->fmt] rows on (when the GEMM context exists), else the GEMV */
static int linear_path(const struct gpu_model *g, const struct kweight *w, int n, const int *rows,
                       int many)
{
    return g->lin && fmt_ok(w->fmt) && n >= rows[w->fmt] ? many : LINEAR_PATH_GEMV;
}

/* the dense-layer path: the NVFP4 tiles in their row range (dense_tiles_min .. _max), else
 * linear_path; x_ok: x is 16-byte aligned, as the tiles need (every step buffer is) */
static int dense_path(const struct gpu_model *g, const struct kweight *w, int n, bool x_ok)
{
    if (w->fmt == KW_FMT_NVFP4 && n >= g->disp.dense_tiles_min && n <= g->disp.dense_tiles_max &&
        x_ok && linear_tiles_ok(w))
        return LINEAR_PATH_TILES;
    return linear_path(g, w, n, g->disp.gemm_rows, LINEAR_PATH_GEMM);
}

int gpu_linear(struct gpu_model *g, float *y, const struct kweight *w, const float *x, int n)
{
    return linear_cuda(g->lin, y, w, 0, x, n, dense_path(g, w, n, ((uintptr_t)x) % 16 == 0),
                       g->stream);
}

/* the GEMV path of w at n rows (what gpu_linear would launch as gemv_cuda) */
static bool gemv_path(const struct gpu_model *g, const struct kweight *w, int n)
{
    return dense_path(g, w, n, true) == LINEAR_PATH_GEMV;
}

int gpu_linear_multi_kind(const struct gpu_model *g, int n_w, const struct kweight *const *ws,
                          int n)
{
    if (n > g->disp.multi_rows || n_w < 1 || n_w > GEMV_MULTI_MAX)
        return GEMV_MULTI_NONE;
    struct gemv_out o[GEMV_MULTI_MAX];
    for (int i = 0; i < n_w; i++) {
        if (!gemv_path(g, ws[i], n) || ws[i]->cols != ws[0]->cols)
            return GEMV_MULTI_NONE;
        o[i] = (struct gemv_out){ ws[i], 0, NULL };
    }
    return gemv_multi_kind(o, n_w, n);
}

/* y_i = x W_i^T in the one launch gpu_linear_multi_kind names; else (or where gemv_multi declines
 * the set) one by one */
int gpu_linear_multi(struct gpu_model *g, int n_w, float *const *ys,
                     const struct kweight *const *ws, const float *x, int n)
{
    if (gpu_linear_multi_kind(g, n_w, ws, n) != GEMV_MULTI_NONE) {
        struct gemv_out o[GEMV_MULTI_MAX];
        for (int i = 0; i < n_w; i++)
            o[i] = (struct gemv_out){ ws[i], 0, ys[i] };
        const int rc = gemv_multi_cuda(o, n_w, x, n, g->stream);
        if (rc != ERR_UNSUPPORTED)
            return rc;
    }
    for (int i = 0; i < n_w; i++) {
        const int rc = gpu_linear(g, ys[i], ws[i], x, n);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int gpu_lm_head(struct gpu_model *g, float *y, const float *x, int n)
{
    return linear_cuda(g->lin, y, &g->lm_head, 0, x, n,
                       linear_path(g, &g->lm_head, n, g->disp.lm_rows, LINEAR_PATH_GEMM_SPLIT),
                       g->stream);
}

int gpu_router(struct gpu_model *g, struct gpu_layer *L, int n)
{
    if (g->lin && L->router_f32 && n >= g->disp.router_rows)
        return linear_f32_cuda(g->lin, g->moe_logits, L->router_f32, L->router.rows,
                               L->router.cols, g->x, n, g->stream);
    return linear_cuda(NULL, g->moe_logits, &L->router, 0, g->x, n, LINEAR_PATH_GEMV, g->stream);
}

size_t gpu_experts_ws_floats(int n, int top_k, int n_experts, int inter, int hidden)
{
    const size_t a = moe_expert_ws_floats(n, top_k, inter, hidden);
    const size_t b = moe_grouped_ws_floats(n, top_k, n_experts, inter, hidden);
    return a > b ? a : b;
}

int gpu_experts(struct gpu_model *g, float *out, const float *x, const int32_t *ids,
                const float *weights, int n, int top_k, int n_experts,
                const struct kweight *gate_up, const struct kweight *down, int accumulate,
                int sh_expert)
{
    const int f = gate_up->fmt;
    if (fmt_ok(f) && n >= g->disp.grouped_rows[f]) {
        const int64_t small = g->disp.grouped_small_per_expert;
        const int64_t e = n_experts > g->disp.grouped_small_min_experts
                              ? n_experts
                              : g->disp.grouped_small_min_experts;
        const int tiles =
            (int64_t)n * top_k <= small * e ? MOE_GROUPED_TILE_ROWS_SMALL : g->disp.grouped_t64;
        return moe_grouped_cuda_tiles(out, g->moe_ws, x, ids, weights, n, top_k, n_experts,
                                      gate_up, down, accumulate, tiles, g->stream);
    }
    return moe_expert_sh_cuda(out, g->moe_ws, x, ids, weights, n, top_k, n_experts, gate_up, down,
                              accumulate, sh_expert, GEMV_PATH_AUTO, g->stream);
}

/* "gemv<32 gemm>=32" for a threshold */
static const char *paths(char *buf, size_t len, const char *few, const char *many, int from)
{
    if (from == INT_MAX)
        snprintf(buf, len, "%s", few);
    else if (from <= 1)
        snprintf(buf, len, "%s", many);
    else
        snprintf(buf, len, "rows<%d:%s,rows>=%d:%s", from, few, from, many);
    return buf;
}

/* the name of a dense path for the log */
static const char *dense_name(int path, const struct kweight *w, bool split)
{
    if (path == LINEAR_PATH_TILES)
        return "nvfp4_tiles";
    if (path == LINEAR_PATH_GEMV)
        return "gemv";
    if (w->fmt == KW_FMT_BF16)
        return split ? "gemm_cublaslt_split_x" : "gemm_cublaslt";
    return split ? "dequant_bf16+gemm_cublaslt_split_x" : "dequant_bf16+gemm_cublaslt";
}

/* One segment "rows<b:name", "rows=a..b:name" or "rows>=a:name" (b = 0: open-ended) after any
 * before it in buf. */
static size_t dense_segment(char *buf, size_t len, size_t at, int a, int b, const char *name)
{
    if (at >= len)
        return at;
    const char *sep = at ? "," : "";
    int n;
    if (a == 1 && b == 0)
        n = snprintf(buf + at, len - at, "%s", name);
    else if (a == 1)
        n = snprintf(buf + at, len - at, "rows<%d:%s", b + 1, name);
    else if (b == 0)
        n = snprintf(buf + at, len - at, "%srows>=%d:%s", sep, a, name);
    else
        n = snprintf(buf + at, len - at, "%srows=%d..%d:%s", sep, a, b, name);
    return n > 0 ? at + (size_t)n : at;
}

/* The dense path by row ranges, read from the dispatch itself at every row count a step can
 * have (1 .. max rows): "rows<9:gemv,rows=9..32:nvfp4_tiles,rows>=33:..." */
static void log_dense(const struct gpu_model *g, const char *cls, const struct kweight *w,
                      const int *rows, bool split)
{
    if (!w || !w->data || !fmt_ok(w->fmt))
        return;
    char b[256] = "";
    size_t at = 0;
    int seg = 1, prev = 0;
    for (int r = 1; r <= g->R; r++) {
        const int p = split ? linear_path(g, w, r, rows, LINEAR_PATH_GEMM_SPLIT)
                            : dense_path(g, w, r, true);
        if (r > 1 && p != prev) {
            at = dense_segment(b, sizeof b, at, seg, r - 1, dense_name(prev, w, split));
            seg = r;
        }
        prev = p;
    }
    dense_segment(b, sizeof b, at, seg, 0, dense_name(prev, w, split));
    LOG_INFO("gpu_dispatch", "class=%s fmt=%s path=\"%s\"", cls, FMT_NAME[w->fmt], b);
}

static void log_experts(const struct gpu_model *g, const char *cls, const struct kweight *w,
                        const struct kweight *down)
{
    char b[320];
    if (!w || !w->data || !fmt_ok(w->fmt))
        return;
    char many[256], t64[96];
    const int p_gu = moe_grouped_small_pipelined(w), p_dn = moe_grouped_small_pipelined(down);
    const bool piped = g->disp.grouped_t64 & MOE_GROUPED_PIPE64;
    const char *w14 = g->disp.grouped_t64 & MOE_GROUPED_PIPE64_COLS ? "(1x4_warps)" : "";
    snprintf(t64, sizeof t64, "64-row tiles%s%s%s%s", piped && p_gu ? " gate_up:pipelined_nvfp4" : "",
             piped && p_gu ? w14 : "", piped && p_dn ? " down:pipelined_nvfp4" : "",
             piped && p_dn ? w14 : "");
    if (g->disp.grouped_small_per_expert > 0)
        snprintf(many, sizeof many,
                 "moe_grouped(16-row tiles%s%s while slots<=%dxmax(experts,%d), else %s)",
                 p_gu ? " gate_up:pipelined_nvfp4" : "", p_dn ? " down:pipelined_nvfp4" : "",
                 g->disp.grouped_small_per_expert, g->disp.grouped_small_min_experts, t64);
    else
        snprintf(many, sizeof many, "moe_grouped(%s)", t64);
    LOG_INFO("gpu_dispatch", "class=%s fmt=%s path=\"%s\"", cls, FMT_NAME[w->fmt],
             paths(b, sizeof b, "moe_expert", many, g->disp.grouped_rows[w->fmt]));
}

/* what gpu_linear_multi launches for these weights at `rows` rows (gpu_linear_multi_kind) */
static const char *multi_name_at(const struct gpu_model *g, const struct kweight *const *ws, int n,
                                 int rows)
{
    if (g->disp.multi_rows < 1)
        return "one launch each (fuse off)";
    for (int i = 0; i < n; i++)
        if (!ws[i]->data)
            return "absent";
    const int kind = gpu_linear_multi_kind(g, n, ws, rows);
    return kind == GEMV_MULTI_STREAM        ? "rows<=8:one stream launch"
           : kind == GEMV_MULTI_STREAM_WIDE ? "rows<=8:one stream launch, the bf16 "
                                              "weights a warp per row in it"
           : kind == GEMV_MULTI_WIDE        ? "rows<=8:one gemv_wide launch"
           : kind == GEMV_MULTI_ROWS        ? "rows==1:one gemv_rows launch (a warp a row)"
                                            : "one launch each";
}

/* ... at one row, and where that is the one-row kernel (GEMV_MULTI_ROWS), at more rows too */
static const char *multi_name(char *buf, size_t len, const struct gpu_model *g,
                              const struct kweight *const *ws, int n)
{
    const char *one = multi_name_at(g, ws, n, 1);
    if (g->disp.multi_rows < 1 || gpu_linear_multi_kind(g, n, ws, 1) != GEMV_MULTI_ROWS)
        return one;
    snprintf(buf, len, "%s; more rows: %s", one, multi_name_at(g, ws, n, 2));
    return buf;
}

void gpu_dispatch_log(const struct gpu_model *g)
{
    const struct gpu_layer *gdn = NULL, *att = NULL;
    for (int l = 0; l < g->cfg.n_layers; l++) {
        const struct gpu_layer *L = &g->layers[l];
        if (L->type == LAYER_FULL_ATTN && !att)
            att = L;
        if (L->type == LAYER_LINEAR_ATTN && !gdn)
            gdn = L;
    }
    if (gdn)
        log_dense(g, "linear_attn", &gdn->qkv, g->disp.gemm_rows, false);
    if (att)
        log_dense(g, "attention", &att->q, g->disp.gemm_rows, false);
    const struct gpu_layer *L0 = &g->layers[0];
    char b[128];
    LOG_INFO("gpu_dispatch", "class=router fmt=%s path=\"%s\"", FMT_NAME[L0->router.fmt],
             paths(b, sizeof b, "gemv", "gemm_cublaslt_fp32",
                   g->lin && L0->router_f32 ? g->disp.router_rows : INT_MAX));
    if (gdn) {
        /* gdn_mixer's choice: the four in one launch where a kernel takes them at one row, else
         * qkv + z and b + a */
        const struct kweight *all[4] = { &gdn->qkv, &gdn->z, &gdn->b, &gdn->a };
        char m1[128], m2[128];
        const int k4 = gpu_linear_multi_kind(g, 4, all, 1);
        if (k4 == GEMV_MULTI_ROWS) /* at one row only: more rows go in pairs */
            LOG_INFO("gpu_dispatch",
                     "class=linear_attn_inputs path=\"qkv+z+b+a: %s; more rows: qkv+z: %s; b+a: "
                     "%s\"",
                     multi_name_at(g, all, 4, 1), multi_name_at(g, all, 2, 2),
                     multi_name_at(g, all + 2, 2, 2));
        else if (k4 != GEMV_MULTI_NONE)
            LOG_INFO("gpu_dispatch", "class=linear_attn_inputs path=\"qkv+z+b+a: %s\"",
                     multi_name(m1, sizeof m1, g, all, 4));
        else
            LOG_INFO("gpu_dispatch", "class=linear_attn_inputs path=\"qkv+z: %s; b+a: %s\"",
                     multi_name(m1, sizeof m1, g, all, 2),
                     multi_name(m2, sizeof m2, g, all + 2, 2));
    }
    if (att) {
        const struct kweight *qkv[3] = { &att->q, &att->k, &att->v };
        char m3[160];
        LOG_INFO("gpu_dispatch", "class=attention_inputs path=\"q+k+v: %s; then %s\"",
                 multi_name(m3, sizeof m3, g, qkv, 3),
                 g->disp.attn_prep ? "attn_prep (gate split, q/k norms, rope, K/V stores: one "
                                     "launch)"
                                   : "gate split, rmsnorm x2, rope x2, kv_write");
    }
    if (L0->router.data) {
        /* gpu_moe_block: the router on its GEMV, few rows, no shared expert or a folded one */
        const bool one = g->disp.multi_rows > 0 && (!L0->has_shared || L0->sh_folded) &&
                         L0->router.rows <= MOE_ROUTER_MAX_EXPERTS;
        char rb[64];
        snprintf(rb, sizeof rb, "rows<=%d", g->disp.multi_rows < MOE_ROUTER_MAX_TOK
                                                ? g->disp.multi_rows : MOE_ROUTER_MAX_TOK);
        LOG_INFO("gpu_dispatch", "class=router_fused path=\"%s%s\"", one ? rb : "never",
                 one ? ": moe_router (router GEMV, shared gate, top-k in one launch), else "
                       "router + moe_route" : ": router + moe_route");
    }
    log_experts(g, "moe", &L0->gate_up, &L0->down);
    if (L0->has_shared)
        log_experts(g, "shared_expert", &L0->sh_gate_up, &L0->sh_down);
    if (L0->has_shared) {
        const int fr = L0->sh_folded ? g->disp.fold_rows[L0->gate_up.fmt] : 0;
        char fb[48] = "never";
        if (fr > 0)
            snprintf(fb, sizeof fb, "rows<=%d", fr);
        LOG_INFO("gpu_dispatch",
                 "class=shared_expert_fold path=\"%s: slot K of moe_expert (one "
                 "route, two launches for routed + shared), else as shared_expert\" "
                 "gate_up_before_wait=%d note=\"%s\"",
                 fb, g->disp.fold_early && fr > 0,
                 L0->sh_folded ? "shared expert stored as expert E of the routed stacks; "
                                 "gate_up_before_wait: its gate/up computed during the router"
                               : "shared expert differs from the routed ones in format or "
                                 "shape");
    }
    log_dense(g, "lm_head", &g->lm_head, g->disp.lm_rows, true);
    if (gdn)
        LOG_INFO("gpu_dispatch",
                 "class=gdn_recurrence path=\"%s\" note=\"rows of one item; items "
                 "with snapshots (verify windows) token-serial; conv_in_step_rows1: passes of "
                 "one-row items run the conv in the recurrence's launch\" serial_tiles_rows1=%d "
                 "serial_tiles_rows2=%d conv_in_step_rows1=%d",
                 paths(b, sizeof b, "gdn_seq_step", "gdn_chunked",
                       g->disp.gdn_chunk_rows > 0 ? g->disp.gdn_chunk_rows : INT_MAX),
                 gdn_seq_step_tiles(1, g->hv, 1), gdn_seq_step_tiles(1, g->hv, 2),
                 g->disp.gdn_conv_fused && !g->gdn_pad && gdn_seq_step_tiles(1, g->hv, 1) == 1);
    if (g->disp.attn_split_rows > 0)
        LOG_INFO("gpu_dispatch",
                 "class=attention_core_few path=\"attn_prefill_split\" "
                 "items>=%d item_rows=%d..%d note=\"passes of that many items of at most that "
                 "many rows (batched verify windows%s); one such item (batch-1 decode, a verify "
                 "window)%s attn_decode row by row; the others as class=attention_core\"",
                 g->disp.attn_split_items, g->disp.attn_decode_path == ATTN_DECODE_PATH_GQA ? 2 : 1,
                 g->disp.attn_split_rows,
                 g->disp.attn_decode_path == ATTN_DECODE_PATH_GQA ? "" : ", batched decode",
                 g->disp.attn_decode_path == ATTN_DECODE_PATH_GQA
                     ? " and passes of one-row items (batched decode)"
                     : "");
    LOG_INFO("gpu_dispatch",
             "class=attention_core path=\"%s\" note=\"main passes; the MTP "
             "pass attends row by row\" source=\"%s\"",
             paths(b, sizeof b,
                   g->disp.attn_decode_path == ATTN_DECODE_PATH_GQA ? "attn_decode_gqa"
                                                                    : "attn_decode_cores",
                   g->disp.attn_prefill_path == ATTN_PREFILL_PATH_WGMMA   ? "attn_prefill_wgmma"
                   : g->disp.attn_prefill_path == ATTN_PREFILL_PATH_FLASH ? "attn_prefill_flash"
                   : g->disp.attn_prefill_path == ATTN_PREFILL_PATH_MMA   ? "attn_prefill_mma"
                                                                          : "attn_prefill_cores",
                   g->disp.attn_prefill_rows),
             g->disp.why);
}
