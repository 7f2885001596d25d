/* Unit (CPU, no device): how the cuda engine turns the worker's flags into gpu_model_opts
 * (wk_engine_cuda_opts, services/worker/gpu/wk_engine_cuda.h), on the built-in tiny model
 * written by tiny_write() into a temp dir. Built where tern_worker_core holds the runner (CUDA
 * builds); it makes no CUDA call, so it runs on machines without a GPU.
 *
 * The tiny geometry (as tests/unit/services/test_sched_wk_kv.c works it out): 1 full-attention
 * layer of 2 KV heads x 32; 16-token blocks; GDN state 14,592 B per sequence; max_model_len 4096.
 * GDN states in the pool (the default, --gdn-state auto):
 *   bf16 K/V: 256 B/token, 4,096 B/block; 8 MiB, 16 seqs -> 8,388,608 / 4,096 = 2,048 blocks, a
 *     state ceil(14,592 / 4,096) = 4 blocks, 16 slots (a batch limit); 1 MiB is refused (one
 *     sequence = (256 + 4) x 4,096 = 1,064,960 B).
 *   fp8 K/V: 128 B/token, 2,048 B/block; 8 MiB -> 4,096 blocks, a state 8 blocks; 1 MiB now fits
 *     one sequence ((256 + 8) x 2,048 B): the dtype reaches the plan.
 * --gdn-state slots: 16 slots of 14,592 B first, (8,388,608 - 233,472) / 4,096 = 1,991 blocks
 * (bf16), / 2,048 = 3,982 (fp8), no state blocks.
 * Checked: slots/blocks handed to the runner equal the plan's, kv_dtype is
 * kv_dtype_parse(--kv-cache-dtype) (0 = auto = bf16 in the runner), without a budget the runner
 * sizes the pool from device memory (mem_util = --gpu-memory-utilization, default 0.9, kv_blocks
 * 0; off with --kv-blocks or a budget; (0, 1] only), --kv-blocks passes
 * through, max_rows / spec_k / max_model_len are the flags' (--max-step-tokens > 65535 is
 * refused: one step is one pass of at most that many rows). Also gpu_model_create's option
 * refusals that come before any device call (bad kv_dtype, cache slots past int32, max_rows,
 * spec_k, n_slots, mem_util outside [0, 1] or with kv_blocks): ERR_INVAL with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "model/model_load.h"
#include "model/tiny.h"
#include "test.h"
#include "wk_cfg.h"
#include "wk_engine_cuda.h"

static char model_dir[64] = "/tmp/tern-cudaopts-XXXXXX";

/* Parse the flags (plus --engine cuda --model DIR --max-model-len 4096 --max-seqs 16) and run
 * wk_engine_cuda_opts on m; returns its status. */
static int opts(const struct model *m, const char *const *extra, int n_extra, int spec_k,
                struct wk_engine_info *in, struct gpu_model_opts *go)
{
    char *argv[32] = { (char *)"tern-worker", (char *)"--engine", (char *)"cuda",
                       (char *)"--model", model_dir, (char *)"--max-model-len", (char *)"4096",
                       (char *)"--max-seqs", (char *)"16" };
    int argc = 9;
    for (int i = 0; i < n_extra && argc < 31; i++)
        argv[argc++] = (char *)extra[i];
    argv[argc] = NULL;
    struct wk_cfg cfg;
    int rc = wk_cfg_parse(&cfg, argc, argv);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0)
        return rc;
    memset(in, 0, sizeof *in);
    return wk_engine_cuda_opts(&cfg, m, spec_k, in, go);
}

int main(void)
{
    log_init("test", LOG_LEVEL_OFF);
    CHECK(mkdtemp(model_dir) != NULL);
    struct tiny_opts to;
    tiny_opts_default(&to);
    CHECK_EQ_INT(tiny_write(&to, model_dir), 0);
    struct model *m = NULL;
    char err[512];
    CHECK_EQ_INT(model_load(&m, model_dir, NULL, err, sizeof err), 0);
    if (!m) {
        printf("model_load: %s\n", err);
        return test_result();
    }
    struct wk_engine_info in;
    struct gpu_model_opts go;

    /* no budget: the pool from the device's memory at 0.9, bf16 (auto) */
    CHECK_EQ_INT(opts(m, NULL, 0, 0, &in, &go), 0);
    CHECK_EQ_INT(go.n_slots, 16);
    CHECK_EQ_INT(go.kv_blocks, 0);
    CHECK(go.mem_util == 0.9);
    CHECK_EQ_INT(go.kv_dtype, KV_DTYPE_AUTO);
    CHECK_EQ_INT(go.max_model_len, 4096);
    CHECK_EQ_INT(go.block_tokens, 16);
    CHECK_EQ_INT(go.max_rows, WK_STEP_TOKENS_CUDA); /* --max-step-tokens 0: the engine's 8192 */
    CHECK_EQ_INT(in.max_step_tokens, WK_STEP_TOKENS_CUDA);
    CHECK_EQ_INT(go.spec_k, 0);
    CHECK_EQ_INT(go.graphs, 1);
    CHECK_EQ_INT(in.n_slots, 16);
    CHECK_EQ_INT(in.max_model_len, 4096);
    CHECK_EQ_INT(in.vocab_size, m->cfg.vocab_size);

    /* --kv-blocks passes through; --kv-cache-dtype without a budget still sets the dtype */
    const char *kb[] = { "--kv-blocks", "300", "--kv-cache-dtype", "fp8", "--max-step-tokens",
                         "64" };
    CHECK_EQ_INT(opts(m, kb, 6, 3, &in, &go), 0);
    CHECK_EQ_INT(go.kv_blocks, 300);
    CHECK_EQ_INT(in.kv_blocks, 300);
    CHECK(go.mem_util == 0.0); // --kv-blocks: no memory sizing
    CHECK_EQ_INT(go.kv_dtype, KV_DTYPE_FP8);
    CHECK_EQ_INT(go.max_rows, 64);
    CHECK_EQ_INT(go.spec_k, 3);

    /* one step is one pass of at most 65535 rows */
    const char *big[] = { "--max-step-tokens", "65536" };
    CHECK_EQ_INT(opts(m, big, 2, 0, &in, &go), ERR_INVAL);
    const char *edge[] = { "--max-step-tokens", "65535" };
    CHECK_EQ_INT(opts(m, edge, 2, 0, &in, &go), 0);
    CHECK_EQ_INT(go.max_rows, 65535);

    /* a budget: slots and blocks from the plan, bf16 */
    const char *b16[] = { "--kv-cache-memory-bytes", "8388608" };
    CHECK_EQ_INT(opts(m, b16, 2, 0, &in, &go), 0);
    CHECK_EQ_INT(go.n_slots, 16);
    CHECK_EQ_INT(go.kv_blocks, 2048);
    CHECK_EQ_INT(in.n_slots, 16);
    CHECK_EQ_INT(in.kv_blocks, 2048);
    CHECK_EQ_INT(in.state_blocks, 4);
    CHECK(go.state_in_pool);
    CHECK_EQ_INT(go.kv_dtype, KV_DTYPE_AUTO);
    CHECK(go.mem_util == 0.0); // a budget: no memory sizing
    /* the states in slots: the slots' bytes first */
    const char *b16s[] = { "--kv-cache-memory-bytes", "8388608", "--gdn-state", "slots" };
    CHECK_EQ_INT(opts(m, b16s, 4, 0, &in, &go), 0);
    CHECK_EQ_INT(go.n_slots, 16);
    CHECK_EQ_INT(go.kv_blocks, 1991);
    CHECK_EQ_INT(in.kv_blocks, 1991);
    CHECK_EQ_INT(in.state_blocks, 0);
    CHECK(!go.state_in_pool);

    /* --gpu-memory-utilization reaches the runner; outside (0, 1] the flags are refused */
    const char *u5[] = { "--gpu-memory-utilization", "0.5" };
    CHECK_EQ_INT(opts(m, u5, 2, 0, &in, &go), 0);
    CHECK(go.mem_util == 0.5);
    CHECK_EQ_INT(go.kv_blocks, 0);
    const char *bad_u[][2] = { { "--gpu-memory-utilization", "0" },
                               { "--gpu-memory-utilization", "1.5" },
                               { "--gpu-memory-utilization", "-0.1" } };
    for (int i = 0; i < 3; i++) {
        char *argv[] = { (char *)"tern-worker", (char *)"--engine", (char *)"cuda",
                         (char *)bad_u[i][0], (char *)bad_u[i][1], NULL };
        struct wk_cfg cfg;
        CHECK(wk_cfg_parse(&cfg, 5, argv) != 0);
    }

    /* the same budget with fp8 K/V: twice the blocks (half the bytes per block) */
    const char *b8[] = { "--kv-cache-memory-bytes", "8388608", "--kv-cache-dtype", "fp8" };
    CHECK_EQ_INT(opts(m, b8, 4, 0, &in, &go), 0);
    CHECK_EQ_INT(go.kv_dtype, KV_DTYPE_FP8);
    CHECK_EQ_INT(go.n_slots, 16);
    CHECK_EQ_INT(go.kv_blocks, 4096);
    CHECK_EQ_INT(in.kv_blocks, 4096);
    CHECK_EQ_INT(in.state_blocks, 8);
    const char *b8s[] = { "--kv-cache-memory-bytes", "8388608", "--kv-cache-dtype", "fp8",
                          "--gdn-state", "slots" };
    CHECK_EQ_INT(opts(m, b8s, 6, 0, &in, &go), 0);
    CHECK_EQ_INT(go.kv_blocks, 3982);
    CHECK_EQ_INT(in.kv_blocks, 3982);

    /* 1 MiB: one 4096-token sequence does not fit in bf16 (refused before any device work),
     * fits in fp8 */
    const char *s16[] = { "--kv-cache-memory-bytes", "1048576", "--kv-cache-dtype", "bf16" };
    CHECK_EQ_INT(opts(m, s16, 4, 0, &in, &go), ERR_FULL);
    const char *s8[] = { "--kv-cache-memory-bytes", "1048576", "--kv-cache-dtype", "fp8" };
    CHECK_EQ_INT(opts(m, s8, 4, 0, &in, &go), 0);
    CHECK(go.kv_blocks >= 256); // one max_model_len sequence: 4096 / 16 blocks
    CHECK(go.n_slots >= 1);
    CHECK_EQ_INT(go.kv_dtype, KV_DTYPE_FP8);

    /* gpu_model_create refuses bad options before any device call */
    const struct gpu_model_opts ok = { .n_slots = 2, .max_model_len = 64 };
    struct gpu_model_opts bad[7] = { ok, ok, ok, ok, ok, ok, ok };
    bad[0].kv_dtype = 7;                 // not auto|bf16|fp8
    bad[1].kv_blocks = 1 << 28;          // x 16 tokens: cache slots past int32
    bad[1].block_tokens = 16;
    bad[2].max_rows = 65536;             // one pass's rows ride a grid axis
    bad[3].spec_k = GPU_SPEC_MAX + 1;
    bad[4].n_slots = 0;
    bad[5].mem_util = 1.5;               // a fraction
    bad[6].mem_util = 0.9;               // memory sizing and a block count: one or the other
    bad[6].kv_blocks = 100;
    for (int i = 0; i < 7; i++) {
        struct gpu_model *g = NULL;
        err[0] = '\0';
        CHECK_EQ_INT(gpu_model_create(&g, m, &bad[i], err, sizeof err), ERR_INVAL);
        CHECK(g == NULL && err[0] != '\0');
    }

    model_destroy(m);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", model_dir);
    CHECK_EQ_INT(system(cmd), 0);
    return test_result();
}
