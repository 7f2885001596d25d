/* sched_cfg: the scheduler's whole configuration, parsed from defaults < file < TERN_* env <
 * flags and validated in one place (sched_cfg_parse). */
#ifndef SCHED_CFG_H
#define SCHED_CFG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/curve.h"
#include "common/msg.h"

struct sched_cfg {
    struct curve_link_cfg curve; // --curve-secret, --curve-allow, --insecure-tcp (common/curve.h)
    char gateway_endpoint[MSG_ENDPOINT_MAX]; // ROUTER for gateways; default
                                             // ipc://<rundir>/scheduler-gw.sock
    char worker_endpoint[MSG_ENDPOINT_MAX];  // ROUTER for workers; default
                                             // ipc://<rundir>/scheduler-wk.sock
    int heartbeat_ms;                        // heartbeat interval on both links, ms; default 500
    int dead_after_ms;                       // a peer silent this long is dead, ms; default 3000
    int queue_cap;                           // waiting requests before QUEUE_FULL; default 256
    int queue_timeout_ms; // a request waiting this long for a worker fails NO_WORKER, ms; default
                          // 60000
    int max_step_tokens;  // token budget of one step (prefill chunks + decodes); default 8192
    int decode_steps;     // decode steps granted per plan (pipelining), default 4
    int drain_timeout_ms; // SIGTERM: finish in-flight requests for at most this long, ms; default
                          // 30000
    int max_msg_bytes;    // frame cap on both links, bytes; default 8 MiB
    int retry_after_ms;   // Retry-After hint in QUEUE_FULL / NO_WORKER / DRAINING, ms; default 1000
    bool check_pool;      // run sched_pool_check after every change (tests); default false
    bool reserve_full;    // reserve KV for prompt + max_new at placement (no growth, no
                          // preemption); default false: grow per decode grant, preempt the
                          // youngest sequence when the pool runs out
    bool fail_on_worker_loss; // a lost worker's requests that already sent tokens end with
                              // WORKER_LOST; default false: they continue elsewhere from the
                              // tokens sent (prefilled again)
    char log_level[16];   // debug|info|warn|error; default info
    /* KV-pool plan (docs/KV.md), checked at startup when model or model_config is set, and by
     * --check. The workers size their own pools; this is the operator's preflight. */
    char model[512];               // model directory (config.json); default none
    char model_config[512];        // config.json file instead of a directory; default none
    char kv_cache_dtype[16];       // auto|bf16|fp8; default auto (= bf16)
    int64_t kv_cache_memory_bytes; // > 0: the cache budget; default 0 = from the device figures
    double gpu_memory_utilization; // fraction of device memory tern may use; default 0.9
    int64_t device_memory_bytes;   // device total for the budget; default 0 (unknown)
    int64_t weights_bytes;         // resident weights; default 0 = *.safetensors sizes in model
    int64_t reserve_bytes;         // activations, workspaces; default 0
    int64_t max_model_len;         // default 0 = max_position_embeddings of the config
    int max_num_seqs;              // sequences at once; default 256
    int speculative_tokens;        // MTP draft tokens; > 0 counts the MTP layer's KV; default 0
    char gdn_state[8];             // pool|slots: where the plan keeps GDN state (the workers'
                                   // layout: cpu and fake keep it in the pool, cuda in slots
                                   // unless its --gdn-state pool);
                                   // default pool
    int64_t check_request_len;     // > 0: --check also counts requests of this length at once
};

/* Fill cfg from argv / env / file. Returns 0 to run, 1 when the program should exit 0 (--help,
 * --check-config passed: it logs the config first), or ERR_INVAL (message printed to stderr). */
int sched_cfg_parse(struct sched_cfg *cfg, int argc, char **argv);
/* Log the effective configuration in one line (ev=config). */
void sched_cfg_log(const struct sched_cfg *cfg);
/* Check values and relations; message in err. Returns 0 or ERR_INVAL. */
int sched_cfg_validate(const struct sched_cfg *cfg, char *err, size_t errlen);

#endif
