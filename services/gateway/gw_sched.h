/* gw_sched: the gateway's link to the scheduler: a DEALER socket whose fd is watched by a
 * uv_poll (edge-triggered: drained until ERR_AGAIN), hello/heartbeats, periodic status polls,
 * and the table of in-flight requests (req_id -> callback). When the scheduler goes silent or
 * restarts, the socket is reopened (so no stale Submit is delivered to a new scheduler) and the
 * link says hello again; the in-flight requests are parked: each keeps its Submit and the tokens
 * it received, and once a scheduler with a ready worker answers, it is submitted again with
 * those tokens appended to its prompt and max_tokens reduced by them, so its stream goes on
 * (the events it then gets count the original prompt and all completion tokens). Greedy output
 * is unchanged; a sampled one continues with a fresh draw (same seed, new sequence) and its
 * presence/frequency penalties then see the earlier tokens as prompt. A request parked longer
 * than resume_ms (or any, with resume_ms 0) gets a link_lost error event. */
#ifndef GW_SCHED_H
#define GW_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct gw_sched;
struct Tern__TokenLogprob;

enum gw_sched_ev_kind {
    GW_SCHED_EV_TOKENS = 0, /* new tokens */
    GW_SCHED_EV_FINISH,     /* terminal: finished normally */
    GW_SCHED_EV_ERROR,      /* terminal: failed (or link lost) */
};

/* One event for one request; pointers are valid only during the callback. */
struct gw_sched_ev {
    enum gw_sched_ev_kind kind;
    const uint32_t *ids; /* TOKENS: token ids */
    size_t n_ids;
    struct Tern__TokenLogprob *const *logprobs; /* TOKENS: one per id when asked, else NULL */
    size_t n_logprobs;
    uint32_t prompt_tokens;     /* TOKENS (first event) and FINISH; 0 = unknown */
    uint32_t completion_tokens; /* FINISH */
    int finish_reason;          /* FINISH: TERN__FINISH_REASON__* */
    uint32_t queue_ms;          /* FINISH */
    uint32_t ttft_ms;           /* FINISH */
    int64_t stop_token_id;      /* FINISH: the stop token that ended it, -1 = none */
    int error_code;             /* ERROR: TERN__ERROR_CODE__* */
    const char *message;        /* ERROR */
    uint32_t retry_after_ms;    /* ERROR */
    bool link_lost;             /* ERROR: the scheduler went away */
};

typedef void (*gw_sched_ev_cb)(void *ctx, const struct gw_sched_ev *ev);

/* Latest status of the scheduler (zeros until known). */
#define GW_SCHED_SPEC_POS_MAX 16 /* draft positions kept for /metrics */

struct gw_sched_status {
    bool up; /* hello answered and heartbeats fresh */
    bool draining;
    uint32_t workers_ready;
    uint32_t running;
    uint32_t waiting;
    double kv_usage;        /* 0..1 */
    uint64_t preemptions;   /* requests preempted since scheduler start */
    uint32_t max_model_len; /* 0 = unknown */
    char model_id[128];     /* "" = unknown */
    uint64_t snapshot_ms;   /* clock_now_ms() of the last StatusSnapshot, 0 = never */
    /* MTP speculative decoding totals (StatusSnapshot fields 40-43; 0 from older schedulers) */
    uint64_t spec_drafts, spec_draft_tokens, spec_accepted_tokens;
    uint64_t spec_accepted_per_pos[GW_SCHED_SPEC_POS_MAX];
    int n_spec_pos;
};

struct curve_link_cfg;
/* Connect (asynchronously) to endpoint; dead_ms: silence before the link counts as down;
 * resume_ms: how long open requests wait for a scheduler to come back (0 = fail them at once).
 * curve: the CURVE flags (common/curve.h), may be NULL. */
struct gw_sched *gw_sched_create(uv_loop_t *loop, const char *endpoint, int dead_ms, int resume_ms,
                                 const struct curve_link_cfg *curve);
/* Closes its handles; call before closing the loop (runs the loop's close callbacks). */
void gw_sched_destroy(struct gw_sched *s);

/* Send a Submit (packed from the given fields) and register cb for req_id's events.
 * Returns 0, ERR_CLOSED (link down: answer 503), ERR_FULL (back-pressure: 503), -errno. */
struct gw_sched_submit {
    uint64_t req_id;
    const int32_t *prompt_ids;
    size_t n_prompt_ids;
    uint32_t max_tokens;
    float temperature, top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty;
    uint32_t top_k;
    bool has_seed;
    uint64_t seed;
    const uint32_t *stop_ids;
    size_t n_stop_ids;
    bool ignore_eos;
    bool logprobs;
    uint32_t top_logprobs;
    uint32_t min_tokens;      /* stop ids masked until this many completion tokens; 0 = off */
    const uint32_t *bias_ids; /* (n_bias) logit_bias */
    const float *bias_vals;
    size_t n_bias;
    const char *model;
    const char *json_schema; /* response_format as a JSON Schema (text/grammar.h); NULL: off */
    uint32_t json_replay;    /* with json_schema: completion tokens at the end of prompt_ids */
};
int gw_sched_submit(struct gw_sched *s, const struct gw_sched_submit *sub, gw_sched_ev_cb cb,
                    void *ctx);
/* Send Abort and forget req_id (no further callbacks). Unknown ids are ignored. */
void gw_sched_abort(struct gw_sched *s, uint64_t req_id, const char *reason);
/* Latest status (copied). */
void gw_sched_status_get(const struct gw_sched *s, struct gw_sched_status *out);
/* A fresh request id (never 0). */
uint64_t gw_sched_next_id(struct gw_sched *s);
/* Stop the timers and the poll so the loop can end (drain finished). */
void gw_sched_stop(struct gw_sched *s);

#endif
