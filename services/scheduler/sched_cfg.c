/* sched_cfg: option table, defaults and validation for tern-scheduler. */
#include "sched_cfg.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/cfg.h"
#include "common/err.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sched_check.h"

#define F(field) offsetof(struct sched_cfg, field)
#define S(field) sizeof(((struct sched_cfg *)0)->field)

static const struct cfg_opt OPTS[] = {
    CURVE_CFG_OPTS(struct sched_cfg, curve),
    {"gateway-endpoint", "TERN_SCHED_GATEWAY_ENDPOINT", CFG_TYPE_STR, F(gateway_endpoint),
     S(gateway_endpoint), 0, 0, "ROUTER for gateways (ipc://PATH or tcp://HOST:PORT)"},
    {"worker-endpoint", "TERN_SCHED_WORKER_ENDPOINT", CFG_TYPE_STR, F(worker_endpoint),
     S(worker_endpoint), 0, 0, "ROUTER for workers"},
    {"heartbeat-ms", "TERN_HEARTBEAT_MS", CFG_TYPE_INT, F(heartbeat_ms), 0, 10, 60000,
     "heartbeat interval, ms (500)"},
    {"dead-after-ms", "TERN_DEAD_AFTER_MS", CFG_TYPE_INT, F(dead_after_ms), 0, 30, 600000,
     "peer silent this long is dead, ms (3000)"},
    {"queue-cap", "TERN_SCHED_QUEUE_CAP", CFG_TYPE_INT, F(queue_cap), 0, 1, 1000000,
     "waiting requests before QUEUE_FULL (256)"},
    {"queue-timeout-ms", "TERN_SCHED_QUEUE_TIMEOUT_MS", CFG_TYPE_INT, F(queue_timeout_ms), 0, 1,
     86400000, "max wait for a worker, ms (60000)"},
    {"max-step-tokens", "TERN_SCHED_MAX_STEP_TOKENS", CFG_TYPE_INT, F(max_step_tokens), 0, 1,
     1 << 20, "tokens per step, prefill + decode; a worker's own limit caps it (8192)"},
    {"decode-steps", "TERN_SCHED_DECODE_STEPS", CFG_TYPE_INT, F(decode_steps), 0, 1, 256,
     "decode steps granted per plan (4)"},
    {"drain-timeout-ms", "TERN_SCHED_DRAIN_TIMEOUT_MS", CFG_TYPE_INT, F(drain_timeout_ms), 0, 0,
     3600000, "SIGTERM drain deadline, ms (30000)"},
    {"max-msg-bytes", "TERN_MAX_MSG_BYTES", CFG_TYPE_INT, F(max_msg_bytes), 0, 4096, 1 << 30,
     "frame cap, bytes (8388608)"},
    {"retry-after-ms", "TERN_SCHED_RETRY_AFTER_MS", CFG_TYPE_INT, F(retry_after_ms), 0, 0, 3600000,
     "Retry-After hint, ms (1000)"},
    {"check-pool", "TERN_SCHED_CHECK_POOL", CFG_TYPE_BOOL, F(check_pool), 0, 0, 0,
     "check pool invariants after every change (false)"},
    {"reserve-full", "TERN_SCHED_RESERVE_FULL", CFG_TYPE_BOOL, F(reserve_full), 0, 0, 0,
     "reserve KV for prompt + max_tokens at placement (false: grow, preempt)"},
    {"fail-on-worker-loss", "TERN_SCHED_FAIL_ON_WORKER_LOSS", CFG_TYPE_BOOL, F(fail_on_worker_loss),
     0, 0, 0,
     "end a lost worker's started requests with WORKER_LOST (false: continue them elsewhere)"},
    {"model", "TERN_MODEL", CFG_TYPE_STR, F(model), S(model), 0, 0,
     "model directory: check the KV-pool plan at startup (none)"},
    {"model-config", "TERN_MODEL_CONFIG", CFG_TYPE_STR, F(model_config), S(model_config), 0, 0,
     "model config.json file instead of --model (--check: also --config FILE) (none)"},
    {"kv-cache-dtype", "TERN_KV_CACHE_DTYPE", CFG_TYPE_STR, F(kv_cache_dtype), S(kv_cache_dtype), 0,
     0, "auto|bf16|fp8 (auto = bf16)"},
    {"kv-cache-memory-bytes", "TERN_KV_CACHE_MEMORY_BYTES", CFG_TYPE_I64, F(kv_cache_memory_bytes),
     0, 0, INT64_MAX,
     "KV cache + GDN state budget, bytes (0 = from "
     "device memory)"},
    {"gpu-memory-utilization", "TERN_GPU_MEMORY_UTILIZATION", CFG_TYPE_DOUBLE,
     F(gpu_memory_utilization), 0, 0, 0, "fraction of device memory to use (0.9)"},
    {"device-memory-bytes", "TERN_DEVICE_MEMORY_BYTES", CFG_TYPE_I64, F(device_memory_bytes), 0, 0,
     INT64_MAX, "device memory for the budget, bytes (0 = unknown)"},
    {"weights-bytes", "TERN_WEIGHTS_BYTES", CFG_TYPE_I64, F(weights_bytes), 0, 0, INT64_MAX,
     "resident weights, bytes (0 = *.safetensors sizes under --model)"},
    {"reserve-bytes", "TERN_RESERVE_BYTES", CFG_TYPE_I64, F(reserve_bytes), 0, 0, INT64_MAX,
     "activations and workspaces, bytes (0)"},
    {"max-model-len", "TERN_MAX_MODEL_LEN", CFG_TYPE_I64, F(max_model_len), 0, 0, 1 << 30,
     "tokens per sequence (0 = max_position_embeddings)"},
    {"max-num-seqs", "TERN_MAX_NUM_SEQS", CFG_TYPE_INT, F(max_num_seqs), 0, 1, 65536,
     "sequences at once (256)"},
    {"gdn-state", "TERN_GDN_STATE", CFG_TYPE_STR, F(gdn_state), S(gdn_state), 0, 0,
     "pool|slots: GDN state as blocks of the KV pool, or slots reserved up front (pool)"},
    {"check-request-len", "TERN_CHECK_REQUEST_LEN", CFG_TYPE_I64, F(check_request_len), 0, 0,
     1 << 30, "with --check: also count concurrent requests of this many tokens (0 = no)"},
    {"speculative-tokens", "TERN_SPECULATIVE_TOKENS", CFG_TYPE_INT, F(speculative_tokens), 0, 0, 16,
     "MTP draft tokens; > 0 adds the MTP layer's KV (0)"},
    {"log-level", "TERN_LOG_LEVEL", CFG_TYPE_STR, F(log_level), S(log_level), 0, 0,
     "debug|info|warn|error (info)"},
};

static void set_defaults(struct sched_cfg *c)
{
    memset(c, 0, sizeof *c);
    /* an unusable runtime dir leaves the endpoints empty: validation reports it */
    if (msg_endpoint_default(c->gateway_endpoint, sizeof c->gateway_endpoint, "scheduler-gw") < 0)
        c->gateway_endpoint[0] = '\0';
    if (msg_endpoint_default(c->worker_endpoint, sizeof c->worker_endpoint, "scheduler-wk") < 0)
        c->worker_endpoint[0] = '\0';
    c->heartbeat_ms = 500;
    c->dead_after_ms = 3000;
    c->queue_cap = 256;
    c->queue_timeout_ms = 60000;
    c->max_step_tokens = 8192;
    c->decode_steps = 4;
    c->drain_timeout_ms = 30000;
    c->max_msg_bytes = (int)MSG_MAX_BYTES_DEFAULT;
    c->retry_after_ms = 1000;
    c->check_pool = false;
    snprintf(c->log_level, sizeof c->log_level, "info");
    snprintf(c->kv_cache_dtype, sizeof c->kv_cache_dtype, "auto");
    c->gpu_memory_utilization = 0.9;
    c->max_num_seqs = 256;
    snprintf(c->gdn_state, sizeof c->gdn_state, "pool");
}

int sched_cfg_validate(const struct sched_cfg *c, char *err, size_t errlen)
{
    if (!msg_endpoint_is_valid(c->gateway_endpoint)) {
        snprintf(err, errlen, "gateway-endpoint \"%s\" is not ipc://PATH or tcp://HOST:PORT",
                 c->gateway_endpoint);
        return ERR_INVAL;
    }
    if (!msg_endpoint_is_valid(c->worker_endpoint)) {
        snprintf(err, errlen, "worker-endpoint \"%s\" is not ipc://PATH or tcp://HOST:PORT",
                 c->worker_endpoint);
        return ERR_INVAL;
    }
    if (strcmp(c->gateway_endpoint, c->worker_endpoint) == 0) {
        snprintf(err, errlen, "gateway-endpoint and worker-endpoint must differ");
        return ERR_INVAL;
    }
    if (c->dead_after_ms < 2 * c->heartbeat_ms) {
        snprintf(err, errlen, "dead-after-ms (%d) must be at least 2 x heartbeat-ms (%d)",
                 c->dead_after_ms, c->heartbeat_ms);
        return ERR_INVAL;
    }
    if (kv_dtype_parse(c->kv_cache_dtype) < 0) {
        snprintf(err, errlen, "kv-cache-dtype \"%s\" is not auto|bf16|fp8", c->kv_cache_dtype);
        return ERR_INVAL;
    }
    if (strcmp(c->gdn_state, "pool") != 0 && strcmp(c->gdn_state, "slots") != 0) {
        snprintf(err, errlen, "gdn-state \"%s\" is not pool|slots", c->gdn_state);
        return ERR_INVAL;
    }
    if (!(c->gpu_memory_utilization > 0.0 && c->gpu_memory_utilization <= 1.0)) {
        snprintf(err, errlen, "gpu-memory-utilization (%g) must be in (0, 1]",
                 c->gpu_memory_utilization);
        return ERR_INVAL;
    }
    if (c->model[0] && c->model_config[0]) {
        snprintf(err, errlen, "give model or model-config, not both");
        return ERR_INVAL;
    }
    if (log_level_parse(c->log_level) < 0) {
        snprintf(err, errlen, "log-level \"%s\" is not debug|info|warn|error", c->log_level);
        return ERR_INVAL;
    }
    return 0;
}

int sched_cfg_parse(struct sched_cfg *cfg, int argc, char **argv)
{
    char err[512];
    struct cfg_result res;
    set_defaults(cfg);
    int rc = cfg_parse(cfg, OPTS, ARRAY_LEN(OPTS), argc, argv, "TERN_SCHED_CONFIG", &res, err,
                       sizeof err);
    if (rc == 0 && res.help) {
        cfg_usage(stdout, "tern-scheduler", OPTS, ARRAY_LEN(OPTS));
        printf("  --%-22s %-30s %s\n  --%-22s %-30s %s\n", "check", "",
               "print the KV-pool plan for --model DIR or --config CONFIG.json, start nothing "
               "(exit 0 fits, 1 refused)",
               "json", "", "with --check: the plan as one JSON object");
        return 1;
    }
    if (rc == 0 && res.n_rest) {
        snprintf(err, sizeof err, "unexpected argument \"%s\"", res.rest[0]);
        rc = ERR_INVAL;
    }
    if (rc == 0)
        rc = sched_cfg_validate(cfg, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "tern-scheduler: %s\n", err);
        return ERR_INVAL;
    }
    if (res.check_config) {
        log_init("scheduler", (enum log_level)log_level_parse(cfg->log_level));
        sched_cfg_log(cfg);
        /* what startup loads: the model config and its KV plan, the CURVE keys */
        const char *eps[] = {cfg->gateway_endpoint, cfg->worker_endpoint};
        if (sched_check_startup(cfg) < 0 || curve_link_check(&cfg->curve, true, eps, 2) < 0) {
            LOG_ERR("check_config", "result=failed");
            return ERR_INVAL;
        }
        LOG_INFO("check_config", "result=ok");
        return 1;
    }
    return 0;
}

void sched_cfg_log(const struct sched_cfg *cfg)
{
    char line[2048];
    cfg_format(cfg, OPTS, ARRAY_LEN(OPTS), line, sizeof line);
    LOG_INFO("config", "%s", line);
}
