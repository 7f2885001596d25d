/* gw: the gateway service state (one struct, passed explicitly). The loop thread owns
 * everything here; only the threadpool work in gw_openai.c touches an exchange's arena off the
 * loop, while it holds a ref. */
#ifndef GW_H
#define GW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/log.h"
#include "gw_cfg.h"
#include "gw_exch.h"
#include "gw_req.h"

struct gw_arena;
struct gw_conn;
struct gw_sched;
struct gw_metrics;
struct gw_text;

/* hot-path warnings (request_fields_ignored): at most one line per interval and endpoint */
#define GW_WARN_INTERVAL_MS 10000

struct gw {
    const struct gw_cfg *cfg; /* borrowed; outlives gw */
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_signal_t sig_term;
    uv_signal_t sig_int;
    uv_timer_t drain_timer;
    uv_timer_t watchdog_timer; /* WATCHDOG=1 at half the systemd interval (when asked) */
    struct gw_conn *conns;     /* list of open connections */
    int n_conns;
    uint64_t next_conn_id;
    uint64_t next_req_id;
    struct gw_sched *sched; /* scheduler link */
    struct gw_metrics *metrics;
    struct gw_text *text; /* tokenizer + template facade (may be NULL: no tokenizer) */
    int n_inflight;       /* exchanges not yet finished */
    bool draining;        /* SIGTERM seen: no new connections, 503 to new requests */
    bool listener_open;
    int port_bound; /* actual port after bind */
    struct gw_req_defaults gen_defaults_file;   /* generation_config.json, when one was read */
    const struct gw_req_defaults *gen_defaults; /* &gen_defaults_file, or NULL: none/off */
    int64_t started_s;                          /* process start, Unix s (/v1/models created) */
    struct log_limit unknown_fields_warn[3]; /* request_fields_ignored: chat, completions,
                                                responses */
};

/* ---- service ---- */
int gw_init(struct gw *gw, const struct gw_cfg *cfg);
/* Runs the loop until SIGTERM drain finishes. 0 on clean exit. */
int gw_run(struct gw *gw);
void gw_deinit(struct gw *gw);
/* Called by gw_conn when an exchange finished, to let the drain logic progress. */
void gw_check_drained(struct gw *gw);

#endif
