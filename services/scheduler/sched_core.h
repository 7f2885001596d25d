/* sched: the scheduler process state and its run loop (one thread, zmq_poll on two ROUTERs).
 * It owns admission, the waiting queue, the request -> worker map and every worker's pool
 * accounting (sched_pool). Public to main.c, the tern CLI and tests through tern_sched_core. */
#ifndef SCHED_H
#define SCHED_H

#define SCHED_SPEC_POS_MAX 16 /* draft positions counted (the workers' largest K) */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/log.h"
#include "common/msg.h"
#include "sched_cfg.h"
#include "sched_pool.h"

#define SCHED_MAX_GATEWAYS 64
#define SCHED_MAX_WORKERS 64
#define SCHED_NAME_MAX 64
#define SCHED_PLANS_INFLIGHT 2 /* plan N+1 is queued at the worker while N runs */

enum sched_req_state {
    SCHED_REQ_STATE_QUEUED = 0, // waiting for a worker
    SCHED_REQ_STATE_PREFILL,    // placed; prompt chunks being handed out
    SCHED_REQ_STATE_DECODE,     // first token sampled; decoding
};

struct sched_sampling {
    float temperature, top_p, min_p;
    float presence_penalty, frequency_penalty, repetition_penalty;
    uint32_t top_k;
    uint64_t seed; // resolved (from the Submit, else derived from req_id)
    bool logprobs;
    uint32_t top_logprobs;
    uint32_t min_tokens; // stop ids masked until this many completion tokens (0 = off)
    uint32_t *bias_ids;  // (n_bias) logit_bias, owned
    float *bias_vals;    // (n_bias)
    uint32_t n_bias;
    char *json_schema;    // constrained decoding (Submit's SamplingParams.json_schema), owned;
                          // NULL: off
    uint32_t json_replay; // completion tokens already at the end of the Submit's prompt
};

struct sched_req {
    uint64_t id; // req_id (gateway-assigned, never 0)
    int gw;      // index in sched.gws
    enum sched_req_state state;
    uint32_t *prompt; // (n_prompt) token ids, as submitted
    uint32_t n_prompt;
    uint32_t *gen; // (n_generated) completion tokens sent so far (for resuming)
    uint32_t cap_gen;
    uint32_t n_resume;    // after a preemption: gen[0..n_resume) are prefilled again
    uint32_t *resume_ids; // (n_prompt + n_resume) prompt + gen, the prefill when resuming
    int fence_worker;     // preempted from this worker (-1 none): not placed there again
    uint64_t fence_step;  // until its plans up to this step_id are done
    struct sched_sampling samp;
    uint32_t max_tokens; // as requested; 0 = up to max_model_len
    uint32_t max_new;    // resolved at placement: completion limit (total)
    uint32_t *stop_ids;  // (n_stop) Submit.stop_ids, plus the worker's EOS at placement
    uint32_t n_stop;
    uint32_t n_stop_user; // how many of stop_ids came from the Submit
    bool ignore_eos;
    int worker;                // index in sched.workers, -1 while queued
    struct sched_pool_seq seq; // blocks + slot on that worker
    uint32_t n_prefilled;      // prefill tokens (prompt, + resumed) handed to the worker so far
    uint32_t n_blocks_sent;    // block table entries the worker has been sent
    uint32_t n_generated;      // completion tokens received
    uint32_t n_granted;        // decode steps granted in plans whose tokens are not back yet
    uint64_t t_submit_ms, t_placed_ms, t_first_ms; // clock_now_ms()
    uint64_t t_queued_ms; // entered the queue last (submit, preemption, resumption; 0 = since
                          // the last timeout check): the queue timeout counts from here
    struct sched_req *q_prev, *q_next;             // waiting queue links
    bool queued;
};

struct sched_gw {
    bool used;
    struct msg_peer peer;
    struct msg_hb hb;
    char name[SCHED_NAME_MAX];
    uint64_t instance;
    uint32_t n_reqs;   // live requests submitted by this gateway
    bool disconnected; // a send found its connection gone
};

enum sched_worker_state {
    SCHED_WORKER_STATE_FREE = 0, // unused entry
    SCHED_WORKER_STATE_LOADING,  // sent LoadProgress, not registered yet
    SCHED_WORKER_STATE_READY,
};

struct sched_worker {
    enum sched_worker_state state;
    struct msg_peer peer;
    struct msg_hb hb;
    char id[SCHED_NAME_MAX]; // Register.worker_id
    char model_id[128];
    uint64_t instance;
    uint32_t max_model_len, max_seqs, block_tokens, kv_blocks, state_slots, vocab_size;
    uint32_t max_step_tokens;
    uint32_t spec_tokens;          // MTP drafts per round the worker runs (0 = none)
    uint32_t *eos_ids; // (n_eos)
    uint32_t n_eos;
    float load_fraction;
    struct sched_pool *pool; // NULL unless READY
    uint32_t n_running;      // requests placed here
    uint64_t step_id;        // last plan sent
    uint64_t step_done;      // last plan reported done
    uint32_t n_inflight;     // plans sent and not done (0..SCHED_PLANS_INFLIGHT)
    uint64_t plan_sent_ns[SCHED_PLANS_INFLIGHT]; // by step_id % SCHED_PLANS_INFLIGHT
    bool plan_first_seen[SCHED_PLANS_INFLIGHT];  // a result of that plan arrived
    uint64_t *frees;                             // req ids to drop in the next plan
    uint32_t n_frees, cap_frees;
    uint64_t tokens_generated;
    bool disconnected;                              // a send found its connection gone
    uint64_t stat_plans, stat_rtt_us, stat_idle_us; // since the last step_stats log
};

struct sched_reqs;

/* Where outgoing frames go: the two ROUTER sockets (send == NULL), or a test's in-process
 * transport (the simulation and the planning benchmark drive the scheduler without zmq). */
struct sched_transport {
    int (*send)(void *ctx, bool to_worker, const struct msg_peer *to, const ProtobufCMessage *msg);
    void *ctx;
};

struct sched {
    const struct sched_cfg *cfg;
    struct sched_transport transport; // send == NULL: the sockets below
    void *zctx;
    struct curve_link curve; // CURVE keys and the ZAP handler of tcp:// links
    struct msg_sock gw_sock; // ROUTER, gateways
    struct msg_sock wk_sock; // ROUTER, workers
    uint64_t instance;       // random nonce of this process
    uint64_t t_start_ms;
    struct sched_reqs *reqs;           // req_id -> sched_req
    struct sched_req *q_head, *q_tail; // waiting queue, FIFO
    uint32_t n_queued;
    struct sched_gw gws[SCHED_MAX_GATEWAYS];
    struct sched_worker workers[SCHED_MAX_WORKERS];
    struct msg_peer reset_peers[16]; // unknown worker peers recently sent a Reset
    uint64_t reset_at_ms[16];
    bool draining;
    uint64_t drain_deadline_ms;
    uint64_t t_stats_ms;      // last step_stats log
    struct log_limit warn;    // rate-limited warnings (one line a second)
    uint32_t warn_suppressed; // warnings not logged before the line being written
    /* counters since start (StatusSnapshot) */
    uint64_t n_submitted, n_finished, n_aborted, n_failed, n_rejected, n_preempted, n_resumed;
    uint64_t prompt_tokens_total, generation_tokens_total;
    /* MTP speculative decoding totals from the workers' StepResults (vLLM spec_decode_*) */
    uint64_t spec_drafts, spec_draft_tokens, spec_accepted_tokens;
    uint64_t spec_accepted_per_pos[SCHED_SPEC_POS_MAX];
    uint32_t n_spec_pos; // positions reported so far (the largest K seen)
};

/* Bind both sockets and set up the tables. cfg is borrowed and must outlive s. 0 or -errno /
 * ERR_*. */
int sched_init(struct sched *s, const struct sched_cfg *cfg);
/* Set up the tables only, no sockets: every frame goes to t->send (tests, benchmarks). Feed
 * input with sched_gw_handle / sched_wk_handle and drive time with sched_turn. 0. */
int sched_init_local(struct sched *s, const struct sched_cfg *cfg, const struct sched_transport *t);
/* One loop turn after input was handled: timers, placement, step plans (what sched_run does
 * after each poll). */
void sched_turn(struct sched *s, uint64_t now_ms);
/* Serve until *stop is set and the drain is over (or a fatal error). 0 or a negative status. */
int sched_run(struct sched *s, volatile sig_atomic_t *stop);
void sched_deinit(struct sched *s);

#endif
