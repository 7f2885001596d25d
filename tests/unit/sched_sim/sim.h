/* sim: an in-process harness around the real scheduler core (tern_sched_core with the
 * sched_transport seam, no sockets): frames the scheduler sends are packed, queued and unpacked
 * again, so that what a fake worker or gateway sees went through the wire format. Shared by the
 * simulation test and bench/sched. */
#ifndef SCHED_SIM_H
#define SCHED_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/tern.pb-c.h"
#include "sched_internal.h"

struct sim_frame {
    bool to_worker;
    struct msg_peer to;
    Tern__Envelope *env; // unpacked copy; free with tern__envelope__free_unpacked
};

struct sim_outbox {
    struct sim_frame *f;
    size_t head, n, cap; // FIFO: f[head .. n)
    uint64_t n_bytes;    // packed bytes seen (for the benchmark)
};

/* The sched_transport send function; ctx is a struct sim_outbox. */
int sim_outbox_send(void *ctx, bool to_worker, const struct msg_peer *to,
                    const ProtobufCMessage *msg);
/* Pop the oldest frame into *out; false when empty. The caller frees out->env. */
bool sim_outbox_pop(struct sim_outbox *o, struct sim_frame *out);
void sim_outbox_destroy(struct sim_outbox *o);

/* A peer id from a short name. */
struct msg_peer sim_peer(const char *name);

/* Register a worker (peer) with the given capacity, through sched_wk_handle. */
void sim_register(struct sched *s, const struct msg_peer *peer, const char *worker_id,
                  uint32_t kv_blocks, uint32_t block_tokens, uint32_t slots, uint32_t max_seqs,
                  uint32_t max_model_len, uint32_t vocab, uint32_t eos, uint32_t max_step_tokens,
                  uint64_t now_ms);
/* The same with the worker process's instance (0: none sent) and the blocks a GDN state takes
 * in the pool (0: states in slots). */
void sim_register_instance(struct sched *s, const struct msg_peer *peer, const char *worker_id,
                           uint64_t instance, uint32_t kv_blocks, uint32_t state_blocks,
                           uint32_t block_tokens, uint32_t slots, uint32_t max_seqs,
                           uint32_t max_model_len, uint32_t vocab, uint32_t eos,
                           uint32_t max_step_tokens, uint64_t now_ms);
/* A LoadProgress frame, as a loading worker sends before it registers. */
void sim_load_progress(struct sched *s, const struct msg_peer *peer, const char *worker_id,
                       float fraction, uint64_t now_ms);
/* Submit through sched_gw_handle (max_tokens 0 = none). */
void sim_submit(struct sched *s, const struct msg_peer *gw, uint64_t req_id, const uint32_t *prompt,
                uint32_t n_prompt, uint32_t max_tokens, bool ignore_eos, uint64_t now_ms);
void sim_abort(struct sched *s, const struct msg_peer *gw, uint64_t req_id, uint64_t now_ms);
/* A bare heartbeat from a gateway (to_worker false) or worker. */
void sim_heartbeat(struct sched *s, const struct msg_peer *peer, bool worker, uint64_t now_ms);

#endif
