/* gpu_smoke: the full-size model on the GPU with dummy weights: load a config (e.g.
 * tests/configs/qwen3.6-35b-a3b.json) with --load-format dummy, upload it, print the backend
 * lines and resident bytes per group, then prefill a short prompt and decode N tokens greedily
 * at batch 1 (and a short run at batch 8), printing tokens/s.
 *   gpu_smoke CONFIG.json [n_decode=256] [max_model_len=1024] [spec_k=4] [kv_dtype=bf16|fp8]
 * Decode runs twice, eager launches and CUDA-graph replay, for both batch sizes. The prompt is
 * one step (one multi-row pass). kv_dtype fp8 stores the paged K/V as e4m3 (scale 1).
 * With an MTP head in the config (mtp_num_hidden_layers) and spec_k > 0 (4th argument, default
 * 4) the runner keeps the MTP K/V on every plain step (so the decode numbers include that
 * upkeep; pass 0 for the plain runner), and the speculation costs are measured at batch 1:
 *   batch1 verify k=K rows=K+1 ms=M ratio=R   one verify step of K+1 rows (all logits) vs
 *                                             one plain decode step (medians of 25)
 *   batch1 window k=K ms=W draft_ms=D         spec_window + commit (drafting on the device,
 *                                             then the verify window); D = W - verify
 *   batch1 spec k=K p=P tokens_per_round=E tok_s=T   E = sum_{i=0..K} P^i, T = E / W
 * Exit 0 when everything ran and the logits stayed finite. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>
#include "common/err.h"
#include "common/file.h"
#include "common/stats.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "gpu_model.h"
#include "model/model_load.h"

#define PROMPT 16
#define BATCH 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the median of v[0..n) */
static double median(const double *v, int n)
{
    struct stats_dist d;
    stats_dist(v, (size_t)n, &d);
    return d.p50;
}

#define REPS 25

/* Verify and window costs at batch 1 (slot 1 for windows, slot 2 for plain steps), graphs on.
 * Returns the number of failed calls. */
static int measure_spec(struct gpu_model *g, const int32_t *prompt, int V, int kmax)
{
    int fails = 0;
    float *lg = xmalloc(sizeof(float) * (size_t)(kmax + 1) * (size_t)V);
    int32_t win[GPU_SPEC_MAX + 1], d[GPU_SPEC_MAX], x = 0;
    double t[REPS], t_plain, t0;
    gpu_model_set_graphs(g, 1);
    /* plain decode step (graph replay), slot 2 */
    gpu_model_seq_open(g, 2);
    struct gpu_item it = { .slot = 2, .tokens = prompt, .n = PROMPT, .pos = 0, .argmax = &x };
    fails += gpu_model_step(g, &it, 1) != 0 || it.rc != 0;
    for (int r = 0; r < REPS && !fails; r++) {
        struct gpu_item s1 = { .slot = 2, .tokens = &x, .n = 1, .pos = PROMPT + r, .argmax = &x };
        t0 = now_s();
        fails += gpu_model_step(g, &s1, 1) != 0 || s1.rc != 0;
        t[r] = now_s() - t0;
    }
    t_plain = median(t, REPS);
    printf("batch1 plain decode step ms=%.3f (graphs, mtp upkeep included)\n", 1e3 * t_plain);
    for (int k = 1; k <= kmax && k <= 4 && !fails; k++) {
        /* verify only: one item of k+1 rows with all logits (eager: more than one row) */
        gpu_model_seq_open(g, 2);
        it = (struct gpu_item){ .slot = 2, .tokens = prompt, .n = PROMPT, .pos = 0 };
        fails += gpu_model_step(g, &it, 1) != 0 || it.rc != 0;
        for (int i = 0; i <= k; i++)
            win[i] = (int32_t)((i * 31 + 7) % V);
        for (int r = 0; r < REPS && !fails; r++) {
            struct gpu_item w = { .slot = 2, .tokens = win, .n = k + 1,
                                  .pos = PROMPT + r * (k + 1), .logits = lg, .all_logits = 1 };
            t0 = now_s();
            fails += gpu_model_step(g, &w, 1) != 0 || w.rc != 0;
            t[r] = now_s() - t0;
        }
        const double t_ver = median(t, REPS);
        printf("batch1 verify k=%d rows=%d ms=%.3f ratio=%.2f\n", k, k + 1, 1e3 * t_ver,
               t_ver / t_plain);
        /* the whole window: drafting + verify, then commit everything */
        gpu_model_seq_open(g, 1);
        it = (struct gpu_item){ .slot = 1, .tokens = prompt, .n = PROMPT, .pos = 0, .argmax = &x };
        fails += gpu_model_step(g, &it, 1) != 0 || it.rc != 0;
        int pos = PROMPT;
        for (int r = 0; r < REPS && !fails; r++) {
            t0 = now_s();
            fails += gpu_model_spec_window(g, 1, pos, x, k, NULL, 0, d, lg) != 0;
            fails += gpu_model_spec_commit(g, 1, k) != 0;
            t[r] = now_s() - t0;
            pos += k + 1;
            x = d[k - 1];
        }
        const double t_win = median(t, REPS);
        printf("batch1 window k=%d ms=%.3f draft_ms=%.3f\n", k, 1e3 * t_win,
               1e3 * (t_win - t_ver));
        static const double ps[3] = { 0.5, 0.7, 0.9 };
        for (int i = 0; i < 3; i++) {
            double e = 0.0, pp = 1.0;
            for (int j = 0; j <= k; j++, pp *= ps[i])
                e += pp;
            printf("batch1 spec k=%d p=%.1f tokens_per_round=%.3f tok_s=%.1f (plain %.1f)\n", k,
                   ps[i], e, e / t_win, 1.0 / t_plain);
        }
    }
    gpu_model_seq_close(g, 1);
    gpu_model_seq_close(g, 2);
    free(lg);
    if (fails)
        printf("batch1 spec measurement failed\n");
    return fails;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_smoke CONFIG.json [n_decode] [max_model_len] [spec_k] "
                        "[kv_dtype]\n");
        return 2;
    }
    log_init("gpu_smoke", LOG_LEVEL_INFO);
    const int n_dec = argc > 2 ? atoi(argv[2]) : 256;
    const int max_len = argc > 3 ? atoi(argv[3]) : 1024;
    int spec_k = argc > 4 ? atoi(argv[4]) : 4;
    const int kv_dtype = argc > 5 ? kv_dtype_parse(argv[5]) : KV_DTYPE_AUTO;
    if (kv_dtype < 0) {
        fprintf(stderr, "kv_dtype \"%s\" is not auto|bf16|fp8\n", argv[5]);
        return 2;
    }
    char dir[256];
    if (file_tmpdir_copy(argv[1], "tern-smoke", "config.json", dir, sizeof dir) < 0) {
        fprintf(stderr, "cannot copy %s\n", argv[1]);
        return 1;
    }
    char err[512];
    struct model *m = NULL;
    struct model_load_opts lo = {
        .dummy = true, .dummy_seed = 1, .skip_mtp = spec_k <= 0, .dummy_device = true};
    double t0 = now_s();
    int rc = model_load(&m, dir, &lo, err, sizeof err);
    double t_load = now_s() - t0;
    file_tmpdir_remove(dir, "config.json");
    if (rc < 0) {
        fprintf(stderr, "model_load: %s (%s)\n", err, err_str(rc));
        return 1;
    }
    struct gpu_model *g = NULL;
    if (!m->has_mtp)
        spec_k = 0;
    struct gpu_model_opts go = { .n_slots = BATCH, .max_model_len = max_len, .block_tokens = 16,
                                 .graphs = 1, .spec_k = spec_k > 0 ? spec_k : 0,
                                 .kv_dtype = kv_dtype };
    t0 = now_s();
    rc = gpu_model_create(&g, m, &go, err, sizeof err);
    double t_up = now_s() - t0;
    const int V = m->cfg.vocab_size;
    model_destroy(m);
    if (rc < 0) {
        fprintf(stderr, "gpu_model_create: %s (%s)\n", err, err_str(rc));
        return 1;
    }
    gpu_model_log(g);
    const struct gpu_model_mem *mem = gpu_model_memory(g);
    printf("config=%s dummy_load_s=%.1f upload_s=%.1f device=\"%s\"\n", argv[1], t_load, t_up,
           gpu_model_device_name(g));
    for (int i = 0; i < MODEL_GROUP_COUNT; i++)
        if (mem->group[i])
            printf("  resident group=%-15s bytes=%lld (%.2f GiB)\n",
                   model_group_name((enum model_group)i), (long long)mem->group[i],
                   mem->group[i] / 1073741824.0);
    printf("  weights=%.2f GiB gdn_state=%.3f GiB (%d slots) kv_pool=%.3f GiB (%d blocks x %d "
           "tokens, %s) activations=%.3f GiB total=%.2f GiB\n",
           mem->weights / 1073741824.0, mem->gdn_state / 1073741824.0, BATCH,
           mem->kv_pool / 1073741824.0, gpu_model_kv_blocks(g), gpu_model_block_tokens(g),
           kv_dtype_name((enum kv_dtype)gpu_model_kv_dtype(g)), mem->activations / 1073741824.0,
           mem->total / 1073741824.0);

    int32_t *toks = xmalloc(sizeof(int32_t) * (size_t)(PROMPT + 2 * n_dec + 1));
    for (int i = 0; i < PROMPT; i++)
        toks[i] = (int32_t)((i * 104729 + 17) % V);
    float *logits = xmalloc(sizeof(float) * (size_t)V);
    int fails = 0;
    /* batch 1: prefill (the prompt as one step), then greedy decode */
    gpu_model_seq_open(g, 0);
    struct gpu_item it = { .slot = 0, .tokens = toks, .n = PROMPT, .pos = 0,
                           .argmax = &toks[PROMPT] };
    t0 = now_s();
    rc = gpu_model_step(g, &it, 1);
    double t_pre = now_s() - t0;
    fails += rc != 0 || it.rc != 0;
    /* decode n_dec tokens eagerly, then n_dec more replaying the CUDA graphs */
    double t_dec[2] = { 0.0, 0.0 };
    for (int pass = 0; pass < 2; pass++) {
        gpu_model_set_graphs(g, pass);
        t0 = now_s();
        for (int i = pass * n_dec; i < (pass + 1) * n_dec && !fails; i++) {
            struct gpu_item d = { .slot = 0, .tokens = &toks[PROMPT + i], .n = 1,
                                  .pos = PROMPT + i, .argmax = &toks[PROMPT + i + 1],
                                  .logits = i == 2 * n_dec - 1 ? logits : NULL };
            rc = gpu_model_step(g, &d, 1);
            fails += rc != 0 || d.rc != 0;
        }
        t_dec[pass] = now_s() - t0;
    }
    int finite = 1;
    for (int v = 0; v < V; v++)
        finite &= isfinite(logits[v]) != 0;
    fails += !finite;
    const int graphs = gpu_model_set_graphs(g, 1);
    printf("batch1: prefill %d tokens %.3f s (%.1f tok/s, one pass); decode %d tokens: "
           "eager %.2f tok/s (%.3f ms/token), graphs%s %.2f tok/s (%.3f ms/token); last logits "
           "finite=%d; ids:", PROMPT, t_pre, PROMPT / t_pre, n_dec, n_dec / t_dec[0],
           1e3 * t_dec[0] / n_dec, graphs ? "" : "(unavailable: eager)", n_dec / t_dec[1],
           1e3 * t_dec[1] / n_dec, finite);
    for (int i = 0; i < 12; i++)
        printf(" %d", toks[PROMPT + i]);
    printf("\n");

    /* batch 8: every slot decodes 64 steps from its own one-token start */
    int32_t cur[BATCH], next[BATCH];
    struct gpu_item bi[BATCH];
    const int steps = 64;
    for (int pass = 0; pass < 2 && !fails; pass++) {
        gpu_model_set_graphs(g, pass);
        for (int s = 0; s < BATCH; s++) {
            gpu_model_seq_open(g, s);
            cur[s] = (int32_t)((s * 7717 + 3) % V);
        }
        t0 = now_s();
        for (int i = 0; i < steps && !fails; i++) {
            for (int s = 0; s < BATCH; s++)
                bi[s] = (struct gpu_item){ .slot = s, .tokens = &cur[s], .n = 1, .pos = i,
                                           .argmax = &next[s] };
            rc = gpu_model_step(g, bi, BATCH);
            for (int s = 0; s < BATCH; s++) {
                fails += bi[s].rc != 0;
                cur[s] = next[s];
            }
            fails += rc != 0;
        }
        double t_b = now_s() - t0;
        printf("batch%d %s: %d steps %.3f s = %.1f tok/s total (%.3f ms/step)\n", BATCH,
               pass ? "graphs" : "eager", steps, t_b, BATCH * steps / t_b, 1e3 * t_b / steps);
    }
    if (spec_k > 0 && !fails)
        fails += measure_spec(g, toks, V, spec_k);
    printf("smoke %s\n", fails ? "FAIL" : "PASS");
    free(toks);
    free(logits);
    gpu_model_destroy(g);
    return fails ? 1 : 0;
}
