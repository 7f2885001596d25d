/* wk_cfg: the worker's whole configuration (defaults < file < TERN_* env < flags), validated
 * in one place. */
#ifndef WK_CFG_H
#define WK_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/curve.h"
#include "common/msg.h"

struct wk_cfg {
    struct curve_link_cfg curve; // --curve-secret, --curve-server-pub, --insecure-tcp
    char scheduler_endpoint[MSG_ENDPOINT_MAX]; // scheduler's worker ROUTER; default
                                               // ipc://<rundir>/scheduler-wk.sock
    char worker_id[64];                        // unique name; default "<host name>-<pid>"
    char engine[16];                           // fake | cpu | cuda; default cpu
    char model[512];     // model directory (engines cpu, cuda); default models/tiny
    int device;          // CUDA device ordinal (engine cuda); 0
    int heartbeat_ms;    // heartbeat interval until the scheduler says otherwise, ms; 500
    int dead_after_ms;   // scheduler silent this long = gone (reset, register again), ms; 3000
    int max_seqs;        // concurrent sequences (state slots); 16
    int block_tokens;    // tokens per KV block; 16
    int kv_blocks;       // KV blocks; 0 = enough for max_seqs sequences of max_model_len
    int max_model_len;   // positions per sequence; 0 = the model's (fake: 4096), capped at 4096 on
                         // cpu
    int max_step_tokens; // tokens one step may carry; 0 = the engine's (wk_cfg_step_tokens)
    int threads;         // compute threads (cpu engine); 0 = online CPUs
    int fake_vocab;      // fake engine vocabulary; 1024
    int fake_eos;        // fake engine EOS id; -1 = none
    int fake_step_us;    // fake engine: sleep per step, us (simulated compute); 0
    bool fake_device_sampling; // fake engine: info.device_sampling (the worker's path for an
                               //  engine that draws tokens itself, without a GPU)
    int max_msg_bytes;   // frame cap, bytes; 8 MiB
    char log_level[16];  // debug|info|warn|error; info
    /* --bench (wk_bench.h): time the engine without a scheduler, print the result, exit */
    bool bench;
    int bench_prompt_len; // prompt tokens per sequence; 512
    int bench_gen;        // decode steps; 128
    int bench_batch;      // sequences; 1
    int bench_chunk;      // prefill tokens per sequence per step; 0 = max_step_tokens / batch
    int bench_seed;       // prompt ids; 0
    double bench_bw_gbs;  // memory bandwidth for the roofline fraction, GB/s; 0 = not reported
    char bench_json[512]; // write the result here too; "" = no

    /* > 0: size slots and blocks from this budget with the model's kv_plan (docs/KV.md;
     * engines fake, cpu); 0 = kv_blocks */
    int64_t kv_cache_memory_bytes;
    /* engine cuda, neither kv_blocks nor kv_cache_memory_bytes given: the KV pool and state
     * slots are what is left of this fraction of the device's memory after the weights and the
     * step buffers (kv_plan, the same arithmetic as tern-scheduler --check); 0.9 */
    double gpu_memory_utilization;
    char kv_cache_dtype[16]; // auto|bf16|fp8 for that plan; auto
    char gdn_state[8];       // auto|pool|slots: GDN states as blocks of the pool or in slots;
                             // auto: pool (every engine)
    int speculative_tokens;  // MTP drafts per round (engine cpu); -1 = 3 with a head, else 0
    int speculative_gate;    // 1: a sequence stops speculating while its rounds are slower than
                             // plain decoding, probing now and then (wk_spec.h); 0: always K; 1
    char load_format[16];    // auto (safetensors) | dummy (random weights of the config's shapes
                             // and formats, model_load_opts.dummy); auto
    char moe_backend[32];    // auto | a backend name (model/backend.h) forced for the expert
                             // classes; engine cuda; auto
    char linear_backend[32]; // auto | a backend name forced for the dense classes; auto
};

/* Tokens per step: --max-step-tokens, or engine_default when it is 0 (the CUDA engine's 8192:
 * 64 streams through the stack measured 1,974 -> 2,137 output tok/s going from 2,048; docs/PERF.md;
 * the CPU and fake engines' 512). */
#define WK_STEP_TOKENS_CUDA 8192
#define WK_STEP_TOKENS_CPU 512
int wk_cfg_step_tokens(const struct wk_cfg *cfg, int engine_default);

/* The backend ids the two --*-backend flags name (BACKEND_AUTO for "auto"). */
int wk_cfg_backend(const char *name);

/* Returns 0 to run, 1 to exit 0 (--help, --check-config), ERR_INVAL (printed) to exit 2. */
int wk_cfg_parse(struct wk_cfg *cfg, int argc, char **argv);
void wk_cfg_log(const struct wk_cfg *cfg);
int wk_cfg_validate(const struct wk_cfg *cfg, char *err, size_t errlen);

#endif
