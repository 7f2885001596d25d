/* wk: the worker process. Two threads:
 *   link thread (main): the DEALER to the scheduler, heartbeats, registration, resets;
 *   exec thread (wk_exec): loads the engine, runs step plans, samples, reports results.
 * They talk over an inproc PAIR with the same Envelope frames as the wire, so a long prefill
 * never stops heartbeats. Only the exec thread touches the engine and the sequences. */
#ifndef WK_H
#define WK_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/msg.h"
#include "wk_cfg.h"
#include "wk_engine.h"

enum wk_link_state {
    WK_LINK_STATE_LOADING = 0, // engine loading; LoadProgress forwarded
    WK_LINK_STATE_RESETTING,   // exec is dropping every sequence
    WK_LINK_STATE_REGISTERING, // Register sent, waiting for RegisterAck
    WK_LINK_STATE_READY,       // registered; plans flow
};

struct wk_exec;

#define WK_REGISTER_WARN_MS 5000          // not registered this long: a register_waiting line
#define WK_REGISTER_RETRY_REFUSED_MS 2000 // extra wait before a Register after a refusal

struct wk {
    const struct wk_cfg *cfg;
    void *zctx;
    struct curve_link curve; // CURVE keys of the scheduler link
    struct msg_sock link; // DEALER to the scheduler
    struct msg_sock pipe; // PAIR to the exec thread (bound)
    char pipe_endpoint[64];
    pthread_t exec_thread;
    bool exec_started;
    struct wk_exec *exec;  // owned; used only by the exec thread once started
    atomic_bool exec_stop; // set by the link thread to end the exec thread
    uint64_t instance;     // nonce of this process
    enum wk_link_state state;
    struct wk_engine_info info; // capacity, from the exec thread once loaded
    char engine_name[16];
    uint64_t sched_instance; // from RegisterAck; a heartbeat with another = restart
    struct msg_hb hb;        // with the scheduler
    uint64_t register_at_ms; // last Register sent
    bool register_failed;    // and it could not be queued (not connected)
    uint64_t registering_since_ms; // first Register since the last ack (0 = registered)
    uint64_t register_warned_ms;   // last register_waiting line
    char register_refusal[256];    // the scheduler's last refusal ("" = none)
    bool ready_sent;               // READY=1 (after the first RegisterAck)
    uint64_t n_plans, n_results;
};

int wk_init(struct wk *w, const struct wk_cfg *cfg);
/* Run until *stop or a fatal error. 0 or a negative status. */
int wk_run(struct wk *w, volatile sig_atomic_t *stop);
void wk_deinit(struct wk *w);

// ---- wk_exec.c (the exec thread) ----

/* Connects its end of the pipe; engine loading happens on the thread. NULL on failure. */
struct wk_exec *wk_exec_create(const struct wk_cfg *cfg, void *zctx, const char *pipe_endpoint,
                               atomic_bool *stop);
void wk_exec_destroy(struct wk_exec *x);
/* pthread entry: arg is the struct wk_exec. Sends LoadProgress, then Register (capacity) or an
 * Error (load failed, then returns), then serves StepPlan / Reset until stop. */
void *wk_exec_main(void *arg);

#endif
