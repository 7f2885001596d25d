/* gpu_bench: prefill and decode timing of the full-size model on the GPU with dummy weights
 * (--load-format dummy from a config.json alone), against the HBM roofline measured in the
 * same run. The dummy weights are written on the GPU (model_load_opts.dummy_device, the values
 * the host fill writes: ktest_gpu_model checks); --host-fill fills them on the host and uploads
 * them, as before (about a minute for the BF16 config on the H200 machine).
 *   gpu_bench CONFIG.json [--prompt-len N[,N..]] [--gen N] [--batch B[,B..]] [--chunk R]
 *             [--graphs 0|1] [--json FILE] [--seed S] [--few-row-paths] [--grouped-small N]
 *             [--grouped-pipe64 -1|0|1|2] [--dense-tiles N] [--gdn-chunk N] [--pdl 1|-1]
 *             [--host-fill]
 *   gpu_bench CONFIG.json --roofline-only [--prompt-len ..] [--gen ..] [--batch ..]  (no GPU)
 * For every (batch, prompt length): B sequences get distinct pseudo-random prompts of N tokens,
 * prefilled together in steps of at most R rows (R/B per sequence; default R = 2048; the runner
 * is created with max_rows = R, so a runner that prefills token by token and one that runs a
 * step's rows at once are both timed as they are); the prefill's argmax is the first token;
 * then gen-1 greedy decode steps of B items (so gen tokens per stream, as Hugging Face's
 * max_new_tokens counts them). Reported: prefill
 * tok/s, TTFT (prefill wall time until a sequence's first token), decode tok/s per stream and
 * total, ITL p50/p90/p99 (wall time of each decode step), bytes per decode step (mean over the
 * decode steps' contexts, model/roofline.h on a header-only load of the same config), copy
 * bandwidth (cudaMemcpy D2D of
 * 1 GiB, read + write counted, median of 9), roofline steps/s = BW / bytes and the fraction
 * achieved. One "bench ..." line per run on stdout; --json appends one JSON object per run
 * (JSON Lines). --few-row-paths runs every step on the GEMV / moe_expert / attn_decode kernels
 * (gpu_model_opts gemm_min_rows = grouped_min_rows = prefill_attn = -1): the runner before the
 * many-row dispatch, for an A/B in the same run. --grouped-small N: moe_grouped with 16-row tiles
 * while a step's expert slots are at most N per expert (gpu_model_opts grouped_small; paths
 * "dispatch_t16N"); -1: 64-row tiles only (paths "dispatch_t64"), for an A/B against the
 * default (16-row tiles up to 16 slots per expert, paths "dispatch"). --grouped-pipe64 -1: the
 * 64-row tiles of NVFP4 experts on the plain kernel, not the pipelined one of the default
 * (gpu_model_opts grouped_pipe64; paths "dispatch_p64off"); 2: pipelined with 1 x 4 warps
 * (MOE_GROUPED_PIPE64_COLS; paths "dispatch_p64c"). --dense-tiles N: NVFP4 dense layers on
 * LINEAR_PATH_TILES from 9 up to N rows (paths "dispatch_dtN"; the default 32), -1: never (paths
 * "dispatch_dtoff"). --gdn-chunk N: GDN items of at least N rows on the chunked recurrence
 * (gpu_model_opts gdn_chunk; paths "dispatch_gcN"), -1: token-serial always ("dispatch_gcoff").
 * --pdl -1: the decode graphs without their programmatic (PDL) edges (gpu_model_opts pdl; paths
 * "dispatch_pdloff"); graph_pdl_edges= says how many the graph of the run's rows kept.
 * Exit 0 when every step ran and the last logits were finite. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/args.h"
#include "common/err.h"
#include "common/file.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/stats.h"
#include "common/xalloc.h"
#include "gpu_model.h"
#include "model/model_load.h"
#include "model/roofline.h"

#define MAX_LIST 8

struct bench_opts {
    const char *config;
    int prompt[MAX_LIST];
    int n_prompt;
    int batch[MAX_LIST];
    int n_batch;
    int gen;
    int chunk;
    int graphs;
    int few_row_paths;
    int grouped_small; // gpu_model_opts.grouped_small (0 = the runner's default)
    int grouped_pipe64; // gpu_model_opts.grouped_pipe64
    int dense_tiles;    // gpu_model_opts.dense_tiles
    int fuse;           // gpu_model_opts.fuse
    int gdn_chunk;      // gpu_model_opts.gdn_chunk
    int pdl;            // gpu_model_opts.pdl
    int split_attn;     // gpu_model_opts.split_attn
    int wgmma_attn;     // gpu_model_opts.wgmma_attn
    int decode_attn;    // gpu_model_opts.decode_attn
    int state_in_pool;  // gpu_model_opts.state_in_pool
    int kv_dtype;       // gpu_model_opts.kv_dtype (KV_DTYPE_BF16 or KV_DTYPE_FP8: auto resolved)
    unsigned seed;
    bool host_fill; // dummy weights filled on the host (not on the device, the default)
    const char *json;
    int roofline_only;
};

struct run_result {
    int batch, prompt, gen;
    double prefill_s, ttft_s, decode_s;
    double itl_p50, itl_p90, itl_p99; // seconds
    double mean_ctx, bytes_step;
    int finite;
    int fails;
    int kernels; // kernels in the layer-stack graph of a decode step of `batch` rows (-1: eager)
    int pdl_edges; // programmatic edges in that graph (-1: eager)
    uint64_t tokens_hash; // FNV-1a over every sequence's greedy tokens, step by step: two runs
                          // whose paths give the same bits (the pipelined expert tiles against
                          // the plain ones) print the same value
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "N[,N..]" (1 .. 1,000,000 each, at most MAX_LIST) into a struct int_list (args_value_fn) */
struct int_list {
    int v[MAX_LIST];
    int n;
};

static int parse_list(void *dst, const char *s, char *err, size_t errlen)
{
    struct int_list *l = dst;
    l->n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1000000 || l->n == MAX_LIST || (*end && *end != ',')) {
            snprintf(err, errlen, "not a list of at most %d integers 1..1000000: \"%s\"",
                     MAX_LIST, s);
            return ERR_INVAL;
        }
        l->v[l->n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    if (l->n == 0) {
        snprintf(err, errlen, "empty list");
        return ERR_INVAL;
    }
    return 0;
}

/* "auto" | "bf16" | "fp8" into an int (enum kv_dtype, auto as the runner resolves it: bf16;
 * args_value_fn) */
static int parse_kv_dtype(void *dst, const char *s, char *err, size_t errlen)
{
    const int d = kv_dtype_parse(s);
    if (d < 0) {
        snprintf(err, errlen, "not auto, bf16 or fp8: \"%s\"", s);
        return ERR_INVAL;
    }
    *(int *)dst = d == KV_DTYPE_AUTO ? KV_DTYPE_BF16 : d;
    return 0;
}

/* 0, or args_exit's code to return (the usage or one line naming the bad flag or value) */
static int parse_args(struct bench_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->state_in_pool = 1;        /* the worker's default (--gdn-state auto) */
    o->kv_dtype = KV_DTYPE_BF16; /* --kv-cache-dtype auto, as the runner resolves it */
    struct int_list prompt = { { 512 }, 1 }, batch = { { 1 }, 1 };
    bool roofline_only = false, few_row_paths = false;
    int graphs = 1, seed = 1;
    o->gen = 256;
    o->chunk = 2048;
    const struct args_opt opts[] = {
        ARGS_STR("CONFIG.json", NULL, &o->config, "model config (dummy weights of its shapes)"),
        ARGS_FN("--prompt-len", "N[,N..]", &prompt, parse_list, "prompt lengths (512)"),
        ARGS_FN("--batch", "B[,B..]", &batch, parse_list, "sequences per run (1)"),
        ARGS_INT("--gen", "N", &o->gen, 1, 1000000,
                 "tokens per sequence, the first from prefill (256)"),
        ARGS_INT("--chunk", "ROWS", &o->chunk, 1, 1000000, "prefill rows per step (2048)"),
        ARGS_INT("--graphs", "0|1", &graphs, 0, 1, "CUDA graphs for decode steps (1)"),
        ARGS_INT("--seed", "S", &seed, 0, 1000000000, "prompt seed (1)"),
        ARGS_STR("--json", "FILE", &o->json, "append one JSON object per run"),
        ARGS_BOOL("--few-row-paths", &few_row_paths,
                  "GEMV / moe_expert / attn_decode at every row count"),
        ARGS_INT("--grouped-small", "N", &o->grouped_small, -1, 4096,
                 "16-row expert tiles up to N slots per expert; -1: 64-row tiles only (0: the "
                 "runner's default)"),
        ARGS_INT("--grouped-pipe64", "-1|0|1|2", &o->grouped_pipe64, -1, 2,
                 "pipelined NVFP4 64-row expert tiles: -1 off, 0 default (on, 1 x 4 warps), 1 on "
                 "with 2 x 2 warps, 2 on with 1 x 4 warps"),
        ARGS_INT("--dense-tiles", "N", &o->dense_tiles, -1, 65536,
                 "NVFP4 dense layers on LINEAR_PATH_TILES from 9 up to N rows (0: default 32, "
                 "-1: never)"),
        ARGS_INT("--fuse", "-1|0", &o->fuse, -1, 0,
                 "few-row launches fused (gemv_multi pairs): 0 default (on), -1 off"),
        ARGS_INT("--gdn-chunk", "N", &o->gdn_chunk, -1, 1 << 20,
                 "GDN items of at least N rows on the chunked recurrence (0: default, -1: never)"),
        ARGS_INT("--split-attn", "0|-1", &o->split_attn, -1, 0,
                 "few-row items through attn_prefill_split: 0 = where it runs, -1 = never (0)"),
        ARGS_INT("--wgmma-attn", "0|-1", &o->wgmma_attn, -1, 0,
                 "prefill attention on wgmma where it runs (0) or the mma.sync FLASH kernel (-1)"),
        ARGS_INT("--decode-attn", "0|-1", &o->decode_attn, -1, 0,
                 "one-row items through attn_decode's GQA tensor-core form where it runs (0) or "
                 "its CUDA-core form (-1)"),
        ARGS_INT("--pdl", "1|-1", &o->pdl, -1, 1,
                 "programmatic (PDL) edges in the decode graphs: 1 on (the default), -1 off"),
        ARGS_INT("--state-in-pool", "0|1", &o->state_in_pool, 0, 1,
                 "GDN states as blocks of the K/V pool (1, tern-worker's default) or in slots (0)"),
        ARGS_FN("--kv-cache-dtype", "auto|bf16|fp8", &o->kv_dtype, parse_kv_dtype,
                "paged K/V element type, as tern-worker's flag (auto = bf16)"),
        ARGS_BOOL("--roofline-only", &roofline_only, "print the roofline lines and exit"),
        ARGS_BOOL("--host-fill", &o->host_fill,
                  "dummy weights filled on the host and uploaded (default: written on the GPU, "
                  "the same values)"),
    };
    const struct args_spec spec = {
        "gpu_bench",
        "CONFIG.json [--prompt-len N[,N..]] [--batch B[,B..]] [--gen N] [--chunk ROWS] "
        "[--graphs 0|1] [--json FILE] [--seed S] [--few-row-paths] [--grouped-small N] "
        "[--grouped-pipe64 -1|0|1|2] [--dense-tiles N] [--fuse -1|0] [--gdn-chunk N] "
        "[--split-attn 0|-1] [--wgmma-attn 0|-1] [--decode-attn 0|-1] [--pdl 1|-1] "
        "[--state-in-pool 0|1] "
        "[--kv-cache-dtype auto|bf16|fp8] [--roofline-only] "
        "[--host-fill]",
        opts, ARRAY_LEN(opts), NULL};
    int rc = args_parse(&spec, argc, argv);
    if (rc != 0)
        return args_exit(rc) == 0 ? -1 : args_exit(rc);
    if (!o->config)
        return args_fail(&spec, "missing CONFIG.json");
    for (int b = 0; b < batch.n; b++)
        if (batch.v[b] > o->chunk) // every sequence needs >= 1 row per prefill step
            return args_fail(&spec, "--batch %d is more than --chunk %d", batch.v[b], o->chunk);
    memcpy(o->prompt, prompt.v, sizeof prompt.v);
    o->n_prompt = prompt.n;
    memcpy(o->batch, batch.v, sizeof batch.v);
    o->n_batch = batch.n;
    o->graphs = graphs;
    o->seed = (unsigned)seed;
    o->few_row_paths = few_row_paths;
    o->roofline_only = roofline_only;
    return 0;
}

/* Mean context (positions attended) over the gen-1 decode steps after a prompt of p tokens:
 * step j feeds position p+j and attends p+j+1 positions. */
static double mean_ctx(int p, int gen)
{
    if (gen < 2)
        return p;
    return p + gen / 2.0; // mean of p+1 .. p+gen-1
}

/* The roofline of one decode step of B sequences at mean context ctx (model/roofline.h). */
static void roof_step(const struct model *hm, int B, double ctx, int kv_dtype,
                      struct roofline_step *r)
{
    const int kv_elem = kv_dtype == KV_DTYPE_FP8 ? 1 : 2;
    struct roofline_opts ro = {.batch = B, .ctx = (int64_t)(ctx + 0.5), .kv_elem = kv_elem};
    if (roofline_decode(hm, &ro, r) < 0)
        memset(r, 0, sizeof *r);
}

/* GDN state of one sequence, one copy (the roofline counts it read and written) */
static double roof_one_state(const struct model *hm)
{
    struct roofline_step r;
    roof_step(hm, 1, 0, KV_DTYPE_BF16, &r);
    return r.gdn_state / 2;
}

static void print_roof(const char *cfg, const struct model *hm)
{
    struct roofline_step r;
    roof_step(hm, 1, 0, KV_DTYPE_BF16, &r);
    printf("roofline config=%s experts=%s dense=%.0f expert_one=%.0f top_k=%d lm_head=%.0f "
           "gdn_state_rw=%.0f kv_per_token=%d\n",
           cfg, qweight_format_name(&hm->layers[0].moe.gate[0]), r.dense, r.expert_bytes,
           hm->cfg.n_experts_per_tok, r.lm_head, r.gdn_state, (int)(r.kv));
}

/* ---- copy bandwidth ---- */

/* GB/s of a 1 GiB device-to-device copy counting read + write; 0 when it cannot run. */
static double copy_bandwidth(void)
{
    const size_t n = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double t[9], gbs = 0.0;
    if (cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess ||
        cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
        goto cleanup;
    if (cudaMemset(a, 1, n) != cudaSuccess ||
        cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice) != cudaSuccess)
        goto cleanup;
    for (int i = 0; i < 9; i++) {
        float ms = 0.0f;
        if (cudaEventRecord(e0, 0) != cudaSuccess ||
            cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, 0) != cudaSuccess ||
            cudaEventRecord(e1, 0) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            goto cleanup;
        t[i] = ms * 1e-3;
    }
    struct stats_dist d;
    stats_dist(t, 9, &d);
    gbs = d.p50 > 0 ? 2.0 * (double)n / d.p50 * 1e-9 : 0.0;
cleanup:
    (void)cudaGetLastError();
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return gbs;
}

/* ---- one run ---- */

static int bench_run(struct gpu_model *g, const struct bench_opts *o, int B, int P,
                     struct run_result *res)
{
    const int V = gpu_model_vocab(g), gen = o->gen;
    memset(res, 0, sizeof *res);
    res->tokens_hash = 14695981039346656037ull;
    res->batch = B;
    res->prompt = P;
    res->kernels = gpu_model_graph_kernels(g, B);
    res->pdl_edges = gpu_model_graph_pdl_edges(g, B);
    res->gen = gen;
    int32_t *prompt = xmalloc(sizeof(int32_t) * (size_t)B * (size_t)P);
    int32_t *cur = xmalloc(sizeof(int32_t) * (size_t)B), *next = xmalloc(sizeof(int32_t) * (size_t)B);
    struct gpu_item *it = xcalloc((size_t)B, sizeof *it);
    double *itl = xcalloc((size_t)gen, sizeof *itl), *done = xcalloc((size_t)B, sizeof *done);
    float *logits = xmalloc(sizeof(float) * (size_t)V);
    uint64_t x = 0x9e3779b97f4a7c15ull * (o->seed + 1) + (uint64_t)P * 1000003u + (uint64_t)B;
    for (int64_t i = 0; i < (int64_t)B * P; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        prompt[i] = (int32_t)(x % (uint64_t)V);
    }
    int rc = 0;
    for (int s = 0; s < B && rc == 0; s++)
        rc = gpu_model_seq_open(g, s);
    if (rc < 0) {
        res->fails++;
        goto cleanup;
    }
    /* prefill: every step gives each unfinished sequence up to chunk/B rows */
    const int per = o->chunk / B;
    int *off = xcalloc((size_t)B, sizeof(int));
    double t0 = now_s();
    nvtxRangePushA("prefill"); /* ranges for a profiler: ncu --nvtx --nvtx-include prefill/ */
    for (int left = B; left > 0 && !res->fails;) {
        int n_it = 0;
        for (int s = 0; s < B; s++) {
            if (off[s] >= P)
                continue;
            const int n = P - off[s] < per ? P - off[s] : per;
            it[n_it++] = (struct gpu_item){ .slot = s, .tokens = prompt + (int64_t)s * P + off[s],
                                            .n = n, .pos = off[s],
                                            .argmax = off[s] + n == P ? &cur[s] : NULL };
        }
        rc = gpu_model_step(g, it, n_it);
        const double t = now_s() - t0;
        res->fails += rc != 0;
        for (int i = 0; i < n_it; i++) {
            const int s = it[i].slot;
            if (it[i].rc != 0) {
                fprintf(stderr, "prefill slot=%d pos=%d n=%d: %s\n", s, it[i].pos, it[i].n,
                        err_str(it[i].rc));
                res->fails++;
            }
            off[s] += it[i].n;
            if (off[s] == P) {
                done[s] = t;
                left--;
            }
        }
    }
    res->prefill_s = now_s() - t0;
    nvtxRangePop();
    free(off);
    for (int s = 0; s < B; s++)
        res->ttft_s += done[s] / B;
    /* decode: gen-1 steps of B items */
    const int steps = gen - 1;
    t0 = now_s();
    nvtxRangePushA("decode");
    for (int j = 0; j < steps && !res->fails; j++) {
        for (int s = 0; s < B; s++)
            it[s] = (struct gpu_item){ .slot = s, .tokens = &cur[s], .n = 1, .pos = P + j,
                                       .argmax = &next[s],
                                       .logits = s == 0 && j == steps - 1 ? logits : NULL };
        const double ts = now_s();
        rc = gpu_model_step(g, it, B);
        itl[j] = now_s() - ts;
        res->fails += rc != 0;
        for (int s = 0; s < B; s++) {
            if (it[s].rc != 0) {
                fprintf(stderr, "decode slot=%d pos=%d: %s\n", s, P + j, err_str(it[s].rc));
                res->fails++;
            }
            cur[s] = next[s];
            for (int k = 0; k < 4; k++) {
                res->tokens_hash ^= (uint8_t)((uint32_t)next[s] >> (8 * k));
                res->tokens_hash *= 1099511628211ull;
            }
        }
    }
    res->decode_s = now_s() - t0;
    nvtxRangePop();
    res->finite = 1;
    if (steps > 0 && !res->fails)
        for (int v = 0; v < V; v++)
            res->finite &= isfinite(logits[v]) != 0;
    res->fails += !res->finite;
    struct stats_dist d;
    stats_dist(itl, (size_t)(steps > 0 ? steps : 0), &d);
    res->itl_p50 = d.p50;
    res->itl_p90 = d.p90;
    res->itl_p99 = d.p99;
cleanup:
    for (int s = 0; s < B; s++)
        gpu_model_seq_close(g, s);
    free(prompt);
    free(cur);
    free(next);
    free(it);
    free(itl);
    free(done);
    free(logits);
    return res->fails ? ERR_STATE : 0;
}

/* ---- report ---- */

static const char *paths_name(const struct bench_opts *o, char *buf, size_t len)
{
    if (o->few_row_paths)
        return "few_row";
    snprintf(buf, len, "dispatch%s",
             o->grouped_pipe64 < 0    ? "_p64off"
             : o->grouped_pipe64 == 1 ? "_p64x2"
             : o->grouped_pipe64 == 2 ? "_p64c"
                                      : "");
    if (o->fuse < 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_fuseoff");
    if (o->pdl < 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_pdloff");
    if (o->split_attn < 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_splitoff");
    if (o->wgmma_attn < 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_wgmmaoff");
    if (o->decode_attn < 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_dacores");
    if (o->dense_tiles > 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_dt%d", o->dense_tiles);
    else if (o->dense_tiles < 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_dtoff");
    if (o->gdn_chunk > 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_gc%d", o->gdn_chunk);
    else if (o->gdn_chunk < 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_gcoff");
    if (o->grouped_small < 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_t64");
    else if (o->grouped_small > 0)
        snprintf(buf + strlen(buf), len - strlen(buf), "_t16x%d", o->grouped_small);
    return buf;
}

static void report(const struct bench_opts *o, const struct model *hm, const char *device,
                   double bw_gbs, int graphs, const struct run_result *res, FILE *json)
{
    const int B = res->batch, steps = res->gen - 1;
    const double ctx = mean_ctx(res->prompt, res->gen);
    struct roofline_step r;
    roof_step(hm, B, ctx, o->kv_dtype, &r);
    const char *efmt = qweight_format_name(&hm->layers[0].moe.gate[0]);
    const double bytes = r.total;
    const double pre_tps = res->prefill_s > 0 ? (double)B * res->prompt / res->prefill_s : 0;
    const double step_s = steps > 0 && res->decode_s > 0 ? res->decode_s / steps : 0;
    const double dec_stream = step_s > 0 ? 1.0 / step_s : 0, dec_total = B * dec_stream;
    const double roof_steps = bw_gbs > 0 ? bw_gbs * 1e9 / bytes : 0;
    const double frac = roof_steps > 0 ? dec_stream / roof_steps : 0;
    char pb[64];
    const char *pn = paths_name(o, pb, sizeof pb);
    printf("bench config=%s experts=%s paths=%s batch=%d prompt=%d gen=%d chunk=%d graphs=%d "
           "prefill_tok_s=%.1f ttft_ms=%.1f decode_tok_s_stream=%.2f decode_tok_s_total=%.1f "
           "itl_p50_ms=%.3f itl_p90_ms=%.3f itl_p99_ms=%.3f mean_ctx=%.1f bytes_per_step=%.0f "
           "experts_touched=%.2f copy_gbs=%.0f roofline_steps_s=%.1f fraction=%.3f "
           "graph_kernels=%d graph_pdl_edges=%d gdn_state=%s kv=%s tokens_hash=%016llx finite=%d "
           "status=%s\n",
           o->config, efmt, pn, B, res->prompt, res->gen, o->chunk, graphs, pre_tps,
           1e3 * res->ttft_s, dec_stream, dec_total, 1e3 * res->itl_p50, 1e3 * res->itl_p90,
           1e3 * res->itl_p99, ctx, bytes, r.experts_touched, bw_gbs, roof_steps, frac,
           res->kernels, res->pdl_edges, o->state_in_pool ? "pool" : "slots",
           kv_dtype_name(o->kv_dtype), (unsigned long long)res->tokens_hash, res->finite,
           res->fails ? "FAIL" : "ok");
    if (!json)
        return;
    fprintf(json,
            "{\"config\":\"%s\",\"device\":\"%s\",\"experts_format\":\"%s\",\"paths\":\"%s\","
            "\"batch\":%d,"
            "\"prompt_len\":%d,\"gen\":%d,\"chunk\":%d,\"graphs\":%d,\"prefill_s\":%.6f,"
            "\"prefill_tok_s\":%.3f,\"ttft_ms\":%.3f,\"decode_s\":%.6f,\"decode_steps\":%d,"
            "\"decode_tok_s_stream\":%.3f,\"decode_tok_s_total\":%.3f,\"itl_ms\":{\"p50\":%.4f,"
            "\"p90\":%.4f,\"p99\":%.4f},\"roofline\":{\"mean_ctx\":%.2f,\"bytes_per_step\":%.0f,"
            "\"dense\":%.0f,\"lm_head\":%.0f,\"expert_one\":%.0f,\"experts_touched\":%.3f,"
            "\"experts\":%.0f,\"gdn_state_rw\":%.0f,\"kv\":%.0f,\"copy_gbs\":%.1f,"
            "\"steps_s\":%.3f,\"fraction\":%.4f},\"graph_kernels\":%d,\"graph_pdl_edges\":%d,"
            "\"kv_cache_dtype\":\"%s\",\"tokens_hash\":\"%016llx\",\"finite\":%d,"
            "\"ok\":%s}\n",
            o->config, device, efmt, pn, B, res->prompt, res->gen, o->chunk, graphs, res->prefill_s,
            pre_tps, 1e3 * res->ttft_s, res->decode_s, steps, dec_stream, dec_total,
            1e3 * res->itl_p50, 1e3 * res->itl_p90, 1e3 * res->itl_p99, ctx, bytes, r.dense,
            r.lm_head, r.expert_bytes, r.experts_touched, r.experts, r.gdn_state, r.kv, bw_gbs,
            roof_steps, frac, res->kernels, res->pdl_edges, kv_dtype_name(o->kv_dtype),
            (unsigned long long)res->tokens_hash, res->finite, res->fails ? "false" : "true");
    fflush(json);
}

static void roofline_table(const struct bench_opts *o, const struct model *hm)
{
    for (int b = 0; b < o->n_batch; b++)
        for (int p = 0; p < o->n_prompt; p++) {
            const double ctx = mean_ctx(o->prompt[p], o->gen);
            struct roofline_step r;
            roof_step(hm, o->batch[b], ctx, o->kv_dtype, &r);
            const double bytes = r.total;
            printf("roofline_step config=%s batch=%d prompt=%d gen=%d mean_ctx=%.1f "
                   "experts_touched=%.2f bytes_per_step=%.0f (%.3f GiB) steps_s_at_4.3TBs=%.1f\n",
                   o->config, o->batch[b], o->prompt[p], o->gen, ctx,
                   r.experts_touched, bytes, bytes / 1073741824.0,
                   4.3e12 / bytes);
        }
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    const int pr = parse_args(&o, argc, argv);
    if (pr != 0)
        return pr < 0 ? 0 : pr; /* -1: the help was printed */
    log_init("gpu_bench", LOG_LEVEL_INFO);
    char dir[256], err[512] = "";
    if (file_tmpdir_copy(o.config, "tern-bench", "config.json", dir, sizeof dir) < 0) {
        fprintf(stderr, "cannot copy %s\n", o.config);
        return 1;
    }
    int status = 1;
    struct model *m = NULL, *hm = NULL;
    struct gpu_model *g = NULL;
    FILE *json = NULL;
    /* shapes and formats only (nothing allocated): the roofline's byte counts */
    struct model_load_opts ho = {.dummy = true, .header_only = true, .skip_mtp = true};
    int rc = model_load(&hm, dir, &ho, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "model_load (header only): %s (%s)\n", err, err_str(rc));
        goto cleanup;
    }
    print_roof(o.config, hm);
    if (o.roofline_only) {
        roofline_table(&o, hm);
        status = 0;
        goto cleanup;
    }
    struct model_load_opts lo = {
        .dummy = true, .dummy_seed = o.seed, .skip_mtp = true, .dummy_device = !o.host_fill};
    double t0 = now_s();
    rc = model_load(&m, dir, &lo, err, sizeof err);
    const double t_load = now_s() - t0;
    if (rc < 0) {
        fprintf(stderr, "model_load: %s (%s)\n", err, err_str(rc));
        goto cleanup;
    }
    int max_b = 0, max_p = 0;
    for (int b = 0; b < o.n_batch; b++)
        max_b = o.batch[b] > max_b ? o.batch[b] : max_b;
    for (int p = 0; p < o.n_prompt; p++)
        max_p = o.prompt[p] > max_p ? o.prompt[p] : max_p;
    struct gpu_model_opts go = {.n_slots = max_b,
                                .max_model_len = max_p + o.gen + 16,
                                .block_tokens = 16,
                                .graphs = o.graphs,
                                .max_rows = o.chunk,
                                .gemm_min_rows = o.few_row_paths ? -1 : 0,
                                .grouped_min_rows = o.few_row_paths ? -1 : 0,
                                .prefill_attn = o.few_row_paths ? -1 : 0,
                                .grouped_small = o.grouped_small,
                                .grouped_pipe64 = o.grouped_pipe64,
                                .dense_tiles = o.dense_tiles,
                                .fuse = o.fuse,
                                .pdl = o.pdl,
                                .split_attn = o.split_attn,
                                .wgmma_attn = o.wgmma_attn,
                                .decode_attn = o.decode_attn,
                                .gdn_chunk = o.gdn_chunk,
                                .state_in_pool = o.state_in_pool,
                                .kv_dtype = o.kv_dtype};
    t0 = now_s();
    rc = gpu_model_create(&g, m, &go, err, sizeof err);
    const double t_up = now_s() - t0;
    model_destroy(m);
    m = NULL;
    if (rc < 0) {
        fprintf(stderr, "gpu_model_create: %s (%s)\n", err, err_str(rc));
        goto cleanup;
    }
    gpu_model_log(g);
    if (gpu_model_max_rows(g) < o.chunk) {
        printf("note: the runner takes at most %d rows per step: --chunk %d lowered to that\n",
               gpu_model_max_rows(g), o.chunk);
        o.chunk = gpu_model_max_rows(g);
        if (o.chunk < max_b)
            goto cleanup;
    }
    const int graphs = gpu_model_set_graphs(g, o.graphs);
    const struct gpu_model_mem *mem = gpu_model_memory(g);
    const double bw = copy_bandwidth();
    printf("setup config=%s device=\"%s\" dummy_load_s=%.1f upload_s=%.1f weights_gib=%.2f "
           "gdn_state_per_seq=%lld (roofline %.0f: conv windows counted in the model dtype, the "
           "runner keeps them in fp32) kv_pool_gib=%.3f copy_gbs=%.0f graphs=%d\n",
           o.config, gpu_model_device_name(g), t_load, t_up, mem->weights / 1073741824.0,
           (long long)(mem->gdn_state / max_b), roof_one_state(hm),
           mem->kv_pool / 1073741824.0, bw, graphs);
    if (o.json && !(json = fopen(o.json, "a"))) {
        fprintf(stderr, "cannot open %s\n", o.json);
        goto cleanup;
    }
    /* warm-up: a prefill of up to 64 tokens per sequence in steps of many rows and a few decode
     * steps, then one sequence of up to 2,048 tokens (the long-item paths: chunked GDN, 64-row
     * expert tiles), so that every kernel path (GEMV and GEMM, cuBLASLt's first calls, lazy
     * module loading) has run once before the clock starts (without the second, the first
     * 512-token prompt measured 97-99 ms with the chunked GDN, 77-89 ms without it, H200
     * 2026-12-01, where its kernels alone were 6% faster) */
    struct bench_opts wo = o;
    wo.gen = 4;
    struct run_result res;
    int fails = bench_run(g, &wo, max_b, max_p < 64 ? max_p : 64, &res) < 0;
    if (!fails && max_p > 64)
        fails = bench_run(g, &wo, 1, max_p < 2048 ? max_p : 2048, &res) < 0;
    for (int b = 0; b < o.n_batch && !fails; b++)
        for (int p = 0; p < o.n_prompt; p++) {
            fails += bench_run(g, &o, o.batch[b], o.prompt[p], &res) < 0;
            report(&o, hm, gpu_model_device_name(g), bw, graphs, &res, json);
        }
    printf("gpu_bench %s\n", fails ? "FAIL" : "PASS");
    status = fails ? 1 : 0;
cleanup:
    if (json)
        fclose(json);
    gpu_model_destroy(g);
    model_destroy(m);
    model_destroy(hm);
    file_tmpdir_remove(dir, "config.json");
    return status;
}
