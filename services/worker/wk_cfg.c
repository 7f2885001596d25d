/* wk_cfg: option table, defaults and validation for tern-worker. */
#include "wk_cfg.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/err.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "wk_engine.h"
#include "model/backend.h"
#include "model/config_load.h"

#define F(field) offsetof(struct wk_cfg, field)
#define S(field) sizeof(((struct wk_cfg *)0)->field)

static const struct cfg_opt OPTS[] = {
    CURVE_CFG_OPTS(struct wk_cfg, curve),
    {"scheduler-endpoint", "TERN_SCHED_WORKER_ENDPOINT", CFG_TYPE_STR, F(scheduler_endpoint),
     S(scheduler_endpoint), 0, 0, "scheduler's worker endpoint"},
    {"worker-id", "TERN_WORKER_ID", CFG_TYPE_STR, F(worker_id), S(worker_id), 0, 0,
     "unique name with the scheduler, logs and status (<host name>-<pid>; the units: "
     "<host name>-<GPU>)"},
    {"engine", "TERN_WORKER_ENGINE", CFG_TYPE_STR, F(engine), S(engine), 0, 0,
     "fake|cpu|cuda (cpu)"},
    {"model", "TERN_MODEL", CFG_TYPE_STR, F(model), S(model), 0, 0,
     "model directory (models/tiny)"},
    {"device", "TERN_WORKER_DEVICE", CFG_TYPE_INT, F(device), 0, 0, 1024,
     "CUDA device ordinal, engine cuda (0)"},
    {"heartbeat-ms", "TERN_HEARTBEAT_MS", CFG_TYPE_INT, F(heartbeat_ms), 0, 10, 60000,
     "heartbeat interval, ms (500)"},
    {"dead-after-ms", "TERN_DEAD_AFTER_MS", CFG_TYPE_INT, F(dead_after_ms), 0, 30, 600000,
     "scheduler silent this long is gone, ms (3000)"},
    {"max-seqs", "TERN_WORKER_MAX_SEQS", CFG_TYPE_INT, F(max_seqs), 0, 1, 4096,
     "concurrent sequences (16)"},
    {"block-tokens", "TERN_WORKER_BLOCK_TOKENS", CFG_TYPE_INT, F(block_tokens), 0, 1, 4096,
     "tokens per KV block (16)"},
    {"kv-blocks", "TERN_WORKER_KV_BLOCKS", CFG_TYPE_INT, F(kv_blocks), 0, 0, 1 << 24,
     "KV blocks, 0 = max-seqs x max-model-len (0)"},
    {"max-model-len", "TERN_MAX_MODEL_LEN", CFG_TYPE_INT, F(max_model_len), 0, 0, 1 << 24,
     "positions per sequence, 0 = model's, cpu capped at 4096 (0)"},
    {"kv-cache-memory-bytes", "TERN_KV_CACHE_MEMORY_BYTES", CFG_TYPE_I64, F(kv_cache_memory_bytes),
     0, 0, INT64_MAX,
     "KV + GDN state budget, bytes: slots and blocks from the model's KV plan (0 = kv-blocks)"},
    {"gpu-memory-utilization", "TERN_GPU_MEMORY_UTILIZATION", CFG_TYPE_DOUBLE,
     F(gpu_memory_utilization), 0, 0, 0,
     "engine cuda: fraction of device memory the worker may use; the KV pool is what is left "
     "after weights and step buffers, unless kv-blocks or kv-cache-memory-bytes is given (0.9)"},
    {"kv-cache-dtype", "TERN_KV_CACHE_DTYPE", CFG_TYPE_STR, F(kv_cache_dtype), S(kv_cache_dtype), 0,
     0, "auto|bf16|fp8 for the KV plan (auto)"},
    {"gdn-state", "TERN_GDN_STATE", CFG_TYPE_STR, F(gdn_state), S(gdn_state), 0, 0,
     "auto|pool|slots: GDN state as blocks of the KV pool, or slots reserved up front (auto: "
     "pool, every engine)"},
    {"max-step-tokens", "TERN_WORKER_MAX_STEP_TOKENS", CFG_TYPE_INT, F(max_step_tokens), 0, 0,
     1 << 20, "tokens per step; 0 = the engine's default: cuda 8192, cpu and fake 512 (0)"},
    {"threads", "TERN_THREADS", CFG_TYPE_INT, F(threads), 0, 0, 1024,
     "compute threads, 0 = online CPUs (0)"},
    {"fake-vocab", "TERN_FAKE_VOCAB", CFG_TYPE_INT, F(fake_vocab), 0, 2, 1 << 20,
     "fake engine vocabulary (1024)"},
    {"fake-eos", "TERN_FAKE_EOS", CFG_TYPE_INT, F(fake_eos), 0, -1, 1 << 20,
     "fake engine EOS id, -1 = none (-1)"},
    {"fake-step-us", "TERN_FAKE_STEP_US", CFG_TYPE_INT, F(fake_step_us), 0, 0, 10000000,
     "fake engine sleep per step, us (0)"},
    {"fake-device-sampling", "TERN_FAKE_DEVICE_SAMPLING", CFG_TYPE_BOOL, F(fake_device_sampling), 0,
     0, 0, "fake engine draws the tokens itself, as the cuda engine does on the GPU (off)"},
    {"max-msg-bytes", "TERN_MAX_MSG_BYTES", CFG_TYPE_INT, F(max_msg_bytes), 0, 4096, 1 << 30,
     "frame cap, bytes (8388608)"},
    {"speculative-tokens", "TERN_SPECULATIVE_TOKENS", CFG_TYPE_INT, F(speculative_tokens), 0, -1,
     16, "MTP draft tokens per round, -1 = 3 when the head exists else 0 (-1)"},
    {"speculative-gate", "TERN_SPECULATIVE_GATE", CFG_TYPE_INT, F(speculative_gate), 0, 0, 1,
     "1 = a sequence stops speculating while its measured rounds are slower than plain decoding "
     "and probes now and then; 0 = every round at K (1)"},
    {"load-format", "TERN_LOAD_FORMAT", CFG_TYPE_STR, F(load_format), S(load_format), 0, 0,
     "auto|dummy: dummy = random weights of the config's shapes and formats (auto)"},
    {"moe-backend", "TERN_MOE_BACKEND", CFG_TYPE_STR, F(moe_backend), S(moe_backend), 0, 0,
     "auto|bf16|fp8|nvfp4_w4a16|nvfp4_w4a4_mma: force the expert kernels, engine cuda (auto)"},
    {"linear-backend", "TERN_LINEAR_BACKEND", CFG_TYPE_STR, F(linear_backend), S(linear_backend), 0,
     0, "auto|bf16|fp8|nvfp4_w4a16|nvfp4_w4a4_mma: force the dense kernels, engine cuda (auto)"},
    {"bench", "TERN_WORKER_BENCH", CFG_TYPE_BOOL, F(bench), 0, 0, 0,
     "time the engine's prefill and decode steps without a scheduler, print, exit (off)"},
    {"bench-prompt-len", "TERN_BENCH_PROMPT_LEN", CFG_TYPE_INT, F(bench_prompt_len), 0, 1, 1 << 24,
     "bench: prompt tokens per sequence (512)"},
    {"bench-gen", "TERN_BENCH_GEN", CFG_TYPE_INT, F(bench_gen), 0, 1, 1 << 24,
     "bench: decode steps, EOS ignored (128)"},
    {"bench-batch", "TERN_BENCH_BATCH", CFG_TYPE_INT, F(bench_batch), 0, 1, 4096,
     "bench: sequences (1)"},
    {"bench-chunk", "TERN_BENCH_CHUNK", CFG_TYPE_INT, F(bench_chunk), 0, 0, 1 << 20,
     "bench: prefill tokens per sequence per step, 0 = max-step-tokens / batch (0)"},
    {"bench-seed", "TERN_BENCH_SEED", CFG_TYPE_INT, F(bench_seed), 0, 0, 1 << 30,
     "bench: seed of the random prompt ids (0)"},
    {"bench-bw-gbs", "TERN_BENCH_BW_GBS", CFG_TYPE_DOUBLE, F(bench_bw_gbs), 0, 0, 0,
     "bench: memory bandwidth for the roofline fraction, GB/s, 0 = none (0)"},
    {"bench-json", "TERN_BENCH_JSON", CFG_TYPE_STR, F(bench_json), S(bench_json), 0, 0,
     "bench: also write the result as JSON to this file"},
    {"log-level", "TERN_LOG_LEVEL", CFG_TYPE_STR, F(log_level), S(log_level), 0, 0,
     "debug|info|warn|error (info)"},
};

static void set_defaults(struct wk_cfg *c)
{
    memset(c, 0, sizeof *c);
    if (msg_endpoint_default(c->scheduler_endpoint, sizeof c->scheduler_endpoint, "scheduler-wk") <
        0)
        c->scheduler_endpoint[0] = '\0'; /* validation reports it */
    /* unique across hosts: the host name plus this process */
    char host[40] = "";
    if (gethostname(host, sizeof host - 1) < 0 || !host[0])
        snprintf(host, sizeof host, "wk");
    snprintf(c->worker_id, sizeof c->worker_id, "%s-%d", host, (int)getpid());
    snprintf(c->engine, sizeof c->engine, "cpu");
    snprintf(c->load_format, sizeof c->load_format, "auto");
    snprintf(c->moe_backend, sizeof c->moe_backend, "auto");
    snprintf(c->linear_backend, sizeof c->linear_backend, "auto");
    snprintf(c->model, sizeof c->model, "models/tiny");
    c->heartbeat_ms = 500;
    c->dead_after_ms = 3000;
    c->max_seqs = 16;
    c->block_tokens = 16;
    c->kv_blocks = 0;
    c->gpu_memory_utilization = 0.9;
    c->max_model_len = 0;
    c->max_step_tokens = 0;
    snprintf(c->kv_cache_dtype, sizeof c->kv_cache_dtype, "auto");
    snprintf(c->gdn_state, sizeof c->gdn_state, "auto");
    c->threads = 0;
    c->fake_vocab = 1024;
    c->fake_eos = -1;
    c->fake_step_us = 0;
    c->speculative_tokens = -1;
    c->speculative_gate = 1;
    c->bench_prompt_len = 512;
    c->bench_gen = 128;
    c->bench_batch = 1;
    c->max_msg_bytes = (int)MSG_MAX_BYTES_DEFAULT;
    snprintf(c->log_level, sizeof c->log_level, "info");
}

int wk_cfg_step_tokens(const struct wk_cfg *cfg, int engine_default)
{
    return cfg->max_step_tokens > 0 ? cfg->max_step_tokens : engine_default;
}

int wk_cfg_backend(const char *name)
{
    return backend_parse(name);
}

int wk_cfg_validate(const struct wk_cfg *c, char *err, size_t errlen)
{
    if (!msg_endpoint_is_valid(c->scheduler_endpoint)) {
        snprintf(err, errlen, "scheduler-endpoint \"%s\" is not ipc://PATH or tcp://HOST:PORT",
                 c->scheduler_endpoint);
        return ERR_INVAL;
    }
    if (strcmp(c->engine, "fake") != 0 && strcmp(c->engine, "cpu") != 0 &&
        strcmp(c->engine, "cuda") != 0) {
        snprintf(err, errlen, "engine \"%s\" is not fake|cpu|cuda", c->engine);
        return ERR_INVAL;
    }
    if (strcmp(c->engine, "cuda") == 0 && !wk_engine_cuda_is_built()) {
        snprintf(err, errlen, "engine cuda is not in this build (built without CUDA: use --engine "
                 "cpu, or rebuild where nvcc exists)");
        return ERR_INVAL;
    }
    if (strcmp(c->engine, "fake") != 0) {
        char path[600];
        snprintf(path, sizeof path, "%s/config.json", c->model);
        if (c->model[0] == '\0' || access(path, R_OK) != 0) {
            snprintf(err, errlen, "engine %s needs --model DIR with a config.json (\"%s\")",
                     c->engine, c->model);
            return ERR_INVAL;
        }
    }
    if (strcmp(c->load_format, "auto") != 0 && strcmp(c->load_format, "dummy") != 0) {
        snprintf(err, errlen, "load-format \"%s\" is not auto|dummy", c->load_format);
        return ERR_INVAL;
    }
    const char *forced[2][2] = {{"moe-backend", c->moe_backend},
                                {"linear-backend", c->linear_backend}};
    for (int i = 0; i < 2; i++) {
        int b = wk_cfg_backend(forced[i][1]);
        if (b < 0) {
            snprintf(err, errlen,
                     "%s \"%s\" is not auto|bf16|fp8|nvfp4_w4a16|nvfp4_w4a4_mma|cpu_ref",
                     forced[i][0], forced[i][1]);
            return ERR_INVAL;
        }
        if (b != BACKEND_AUTO && b != BACKEND_CPU_REF && strcmp(c->engine, "cuda") != 0) {
            snprintf(err, errlen,
                     "%s %s needs --engine cuda: engine %s computes every layer class with the "
                     "cpu_ref backend",
                     forced[i][0], forced[i][1], c->engine);
            return ERR_INVAL;
        }
    }
    if (strcmp(c->gdn_state, "auto") != 0 && strcmp(c->gdn_state, "pool") != 0 &&
        strcmp(c->gdn_state, "slots") != 0) {
        snprintf(err, errlen, "gdn-state \"%s\" is not auto|pool|slots", c->gdn_state);
        return ERR_INVAL;
    }
    if (kv_dtype_parse(c->kv_cache_dtype) < 0) {
        snprintf(err, errlen, "kv-cache-dtype \"%s\" is not auto|bf16|fp8", c->kv_cache_dtype);
        return ERR_INVAL;
    }
    if (!(c->gpu_memory_utilization > 0.0 && c->gpu_memory_utilization <= 1.0)) {
        snprintf(err, errlen, "gpu-memory-utilization (%g) must be in (0, 1]",
                 c->gpu_memory_utilization);
        return ERR_INVAL;
    }
    if (c->kv_cache_memory_bytes > 0 && c->kv_blocks > 0) {
        snprintf(err, errlen, "give kv-cache-memory-bytes or kv-blocks, not both");
        return ERR_INVAL;
    }
    if (c->worker_id[0] == '\0') {
        snprintf(err, errlen, "worker-id must not be empty");
        return ERR_INVAL;
    }
    if (c->dead_after_ms < 2 * c->heartbeat_ms) {
        snprintf(err, errlen, "dead-after-ms (%d) must be at least 2 x heartbeat-ms (%d)",
                 c->dead_after_ms, c->heartbeat_ms);
        return ERR_INVAL;
    }
    if (c->fake_eos >= c->fake_vocab) {
        snprintf(err, errlen, "fake-eos (%d) must be below fake-vocab (%d)", c->fake_eos,
                 c->fake_vocab);
        return ERR_INVAL;
    }
    if (c->bench_bw_gbs < 0) {
        snprintf(err, errlen, "bench-bw-gbs must be >= 0");
        return ERR_INVAL;
    }
    if (log_level_parse(c->log_level) < 0) {
        snprintf(err, errlen, "log-level \"%s\" is not debug|info|warn|error", c->log_level);
        return ERR_INVAL;
    }
    return 0;
}

/* --check-config loads what startup will, short of the weights: the model config, the CURVE
 * keys. Logs what fails. */
static int check_loads(const struct wk_cfg *cfg)
{
    char err[512];
    struct model_config mc;
    if (strcmp(cfg->engine, "fake") != 0 && config_load(&mc, cfg->model, err, sizeof err) < 0) {
        LOG_ERR("model_config_invalid", "model=%s msg=\"%s\"", cfg->model, err);
        return ERR_INVAL;
    }
    const char *eps[] = {cfg->scheduler_endpoint};
    return curve_link_check(&cfg->curve, false, eps, 1);
}

int wk_cfg_parse(struct wk_cfg *cfg, int argc, char **argv)
{
    char err[512];
    struct cfg_result res;
    set_defaults(cfg);
    int rc = cfg_parse(cfg, OPTS, ARRAY_LEN(OPTS), argc, argv, "TERN_WORKER_CONFIG", &res, err,
                       sizeof err);
    if (rc == 0 && res.help) {
        cfg_usage(stdout, "tern-worker", OPTS, ARRAY_LEN(OPTS));
        return 1;
    }
    if (rc == 0 && res.n_rest) {
        snprintf(err, sizeof err, "unexpected argument \"%s\"", res.rest[0]);
        rc = ERR_INVAL;
    }
    if (rc == 0)
        rc = wk_cfg_validate(cfg, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "tern-worker: %s\n", err);
        return ERR_INVAL;
    }
    if (res.check_config) {
        log_init("worker", (enum log_level)log_level_parse(cfg->log_level));
        wk_cfg_log(cfg);
        if (check_loads(cfg) < 0) {
            LOG_ERR("check_config", "result=failed");
            return ERR_INVAL;
        }
        LOG_INFO("check_config", "result=ok");
        return 1;
    }
    return 0;
}

void wk_cfg_log(const struct wk_cfg *cfg)
{
    char line[2048];
    cfg_format(cfg, OPTS, ARRAY_LEN(OPTS), line, sizeof line);
    LOG_INFO("config", "%s", line);
}
