/* sched_internal: declarations shared by the scheduler's files (not for other programs). */
#ifndef SCHED_INTERNAL_H
#define SCHED_INTERNAL_H

#include "proto/tern.pb-c.h"
#include "sched_core.h"

// ---- sched_reqs.c: request table (req_id -> request) and the waiting queue ----

struct sched_reqs *sched_reqs_create(void);
/* Frees every request still in the table. */
void sched_reqs_destroy(struct sched_reqs *t);
/* Takes r. ERR_STATE if r->id is already present. */
int sched_reqs_add(struct sched_reqs *t, struct sched_req *r);
struct sched_req *sched_reqs_find(const struct sched_reqs *t, uint64_t id);
/* Unlink r from the table (does not free it). */
void sched_reqs_remove(struct sched_reqs *t, struct sched_req *r);
uint32_t sched_reqs_count(const struct sched_reqs *t);
/* The i-th request (0 <= i < count); order changes on remove. */
struct sched_req *sched_reqs_at(const struct sched_reqs *t, uint32_t i);
/* Free a request's own memory (not its pool holdings). NULL is a no-op. */
void sched_req_destroy(struct sched_req *r);

void sched_queue_push_back(struct sched *s, struct sched_req *r);
void sched_queue_push_front(struct sched *s, struct sched_req *r);
void sched_queue_remove(struct sched *s, struct sched_req *r);

// ---- sched.c: sending and request endings ----

void sched_env_init(Tern__Envelope *env, uint64_t req_id);
/* One frame to a peer on either link, through the transport (sockets or a test's function). */
int sched_send_raw(struct sched *s, bool to_worker, const struct msg_peer *to,
                   const Tern__Envelope *env);
/* Send env to gateway gw / worker w; failures are logged here (rate-limited) and dropped. */
int sched_send_gw(struct sched *s, int gw, const Tern__Envelope *env);
int sched_send_wk(struct sched *s, struct sched_worker *w, const Tern__Envelope *env);
/* Terminal Finish / Error to the gateway, then sched_req_drop. */
void sched_req_finish(struct sched *s, struct sched_req *r, Tern__FinishReason reason,
                      int stop_token);
void sched_req_fail(struct sched *s, struct sched_req *r, Tern__ErrorCode code, const char *msg);
/* Release r's pool holdings (queueing a free for its worker), unlink and free it. */
void sched_req_drop(struct sched *s, struct sched_req *r);
/* Undo a placement: pool freed, worker told to drop it, back to the head of the queue as new. */
void sched_req_requeue(struct sched *s, struct sched_req *r);
/* Preempt a running request to free its KV: like requeue, but the tokens already sent are kept
 * and prefilled again on the next placement (recompute), and it is not placed back on the same
 * worker until that worker's plans sent so far are done. */
void sched_req_preempt(struct sched *s, struct sched_req *r);
/* Its worker is gone after tokens were sent: queue it again to continue from those tokens (the
 * prompt and the tokens so far are prefilled again elsewhere; greedy output is unchanged). */
void sched_req_resume(struct sched *s, struct sched_req *r);
/* Error to a peer that sent something we cannot take (req_id may be 0). */
void sched_reply_error(struct sched *s, struct msg_sock *sock, const struct msg_peer *to,
                       uint64_t req_id, Tern__ErrorCode code, const char *msg);
void sched_check_pools(struct sched *s);

// ---- sched_gw.c: the gateway link ----

void sched_gw_handle(struct sched *s, const struct msg_peer *from, Tern__Envelope *env,
                     uint64_t now_ms);
/* Heartbeats to gateways, dead-gateway cleanup. */
void sched_gw_tick(struct sched *s, uint64_t now_ms);
/* Requests waiting too long for a worker. */
void sched_gw_expire_queue(struct sched *s, uint64_t now_ms);
/* TokenEvent for r with tokens ids[0..n) (logprobs may be NULL). */
void sched_gw_send_tokens(struct sched *s, struct sched_req *r, const uint32_t *ids, size_t n,
                          Tern__TokenLogprob **logprobs, size_t n_logprobs, uint32_t index);

// ---- sched_wk.c: the worker link ----

void sched_wk_handle(struct sched *s, const struct msg_peer *from, Tern__Envelope *env,
                     uint64_t now_ms);
/* Heartbeats to workers, dead-worker cleanup, periodic step stats. */
void sched_wk_tick(struct sched *s, uint64_t now_ms);
/* A worker is gone (dead, restarted or reset): fail or re-queue its requests, free its pool. */
void sched_wk_lost(struct sched *s, struct sched_worker *w, const char *why);
int sched_wk_index(const struct sched *s, const struct sched_worker *w);

// ---- sched_batch.c: placement and step plans ----

/* Place waiting requests on workers (FIFO, most headroom first). */
void sched_batch_place(struct sched *s, uint64_t now_ms);
/* Send the next plan to every ready worker that has none in flight. */
void sched_batch_plan_all(struct sched *s);

#endif
