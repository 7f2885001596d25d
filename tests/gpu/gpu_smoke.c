/* gpu_smoke: the full-size model on the GPU with dummy weights: load a config (e.g.
 * tests/configs/qwen3.6-35b-a3b.json) with --load-format dummy, upload it, print the backend
 * lines and resident bytes per group, then prefill a short prompt and decode N tokens greedily
 * at batch 1 (and a short run at batch 8), printing tokens/s.
 *   gpu_smoke CONFIG.json [n_decode=256] [max_model_len=1024]
 * Decode runs twice, eager launches and CUDA-graph replay, for both batch sizes.
 * Exit 0 when everything ran and the logits stayed finite. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>
#include "common/err.h"
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

static int copy_config(const char *src, char *dir, size_t dlen)
{
    snprintf(dir, dlen, "/tmp/tern-smoke-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char dst[512];
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    int rc = in && out ? 0 : -1;
    char buf[65536];
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = -1;
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_smoke CONFIG.json [n_decode] [max_model_len]\n");
        return 2;
    }
    log_init("gpu_smoke", LOG_LEVEL_INFO);
    const int n_dec = argc > 2 ? atoi(argv[2]) : 256;
    const int max_len = argc > 3 ? atoi(argv[3]) : 1024;
    char dir[256];
    if (copy_config(argv[1], dir, sizeof dir) < 0) {
        fprintf(stderr, "cannot copy %s\n", argv[1]);
        return 1;
    }
    char err[512];
    struct model *m = NULL;
    struct model_load_opts lo = { .dummy = true, .dummy_seed = 1, .skip_mtp = true };
    double t0 = now_s();
    int rc = model_load(&m, dir, &lo, err, sizeof err);
    double t_load = now_s() - t0;
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
    if (rc < 0) {
        fprintf(stderr, "model_load: %s (%s)\n", err, err_str(rc));
        return 1;
    }
    struct gpu_model *g = NULL;
    struct gpu_model_opts go = { .n_slots = BATCH, .max_model_len = max_len, .block_tokens = 16,
                                 .graphs = 1 };
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
           "tokens) activations=%.3f GiB total=%.2f GiB\n",
           mem->weights / 1073741824.0, mem->gdn_state / 1073741824.0, BATCH,
           mem->kv_pool / 1073741824.0, gpu_model_kv_blocks(g), gpu_model_block_tokens(g),
           mem->activations / 1073741824.0, mem->total / 1073741824.0);

    int32_t *toks = xmalloc(sizeof(int32_t) * (size_t)(PROMPT + 2 * n_dec + 1));
    for (int i = 0; i < PROMPT; i++)
        toks[i] = (int32_t)((i * 104729 + 17) % V);
    float *logits = xmalloc(sizeof(float) * (size_t)V);
    int fails = 0;
    /* batch 1: prefill (token by token inside one step), then greedy decode */
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
    printf("batch1: prefill %d tokens %.3f s (%.1f tok/s, token by token); decode %d tokens: "
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
    printf("smoke %s\n", fails ? "FAIL" : "PASS");
    free(toks);
    free(logits);
    gpu_model_destroy(g);
    return fails ? 1 : 0;
}
