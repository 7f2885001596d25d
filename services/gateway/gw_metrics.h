/* gw_metrics: the gateway's Prometheus registry, with vLLM's metric names (ECOSYSTEM.md §A.5),
 * every series labelled model_name. Loop thread only. Gauges that the scheduler owns (running,
 * waiting, KV usage) are passed in at render time from its latest status snapshot. */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stdbool.h>
#include <stdint.h>

struct buf;
struct gw_metrics;

/* What the scheduler last told us (all zero when unknown). */
struct gw_metrics_sched {
    bool up; /* scheduler link alive */
    uint32_t workers_ready;
    uint32_t running;
    uint32_t waiting;
    double kv_usage;          /* 0..1 */
    uint64_t num_preemptions; /* StatusSnapshot.requests_preempted */
    /* speculative decoding, 0 until the scheduler reports it (StatusSnapshot has no fields for
     * it yet) */
    uint64_t spec_drafts;                  /* draft rounds */
    uint64_t spec_draft_tokens;            /* tokens proposed */
    uint64_t spec_accepted_tokens;         /* tokens accepted */
    const uint64_t *spec_accepted_per_pos; /* accepted at draft position i, or NULL */
    int n_spec_pos;
};

/* This process, for process_* series (filled by gw_metrics_process_read). */
struct gw_metrics_proc {
    double rss_bytes, vsize_bytes, cpu_seconds;
    int open_fds;        /* -1 unknown */
    double start_time_s; /* unix time the process started, 0 unknown */
};

/* Read /proc/self and getrusage. 0 or ERR_IO (fields left at what could be read). */
int gw_metrics_process_read(struct gw_metrics_proc *p);

struct gw_metrics *gw_metrics_create(const char *model_name);
void gw_metrics_destroy(struct gw_metrics *m);
/* One HTTP response: http_requests_total{handler,method,status}. */
void gw_metrics_http(struct gw_metrics *m, const char *handler, const char *method, int status);
/* One finished generation. finish: "stop", "length", "abort", "error"; times in seconds,
 * negative when unknown (then not observed). */
void gw_metrics_request(struct gw_metrics *m, const char *finish, int64_t prompt_tokens,
                        int64_t gen_tokens, double ttft_s, double e2e_s, double queue_s);
/* One gap between two streamed token events, seconds. */
void gw_metrics_itl(struct gw_metrics *m, double s);
/* Prometheus text exposition format 0.0.4 into out. */
void gw_metrics_render(const struct gw_metrics *m, const struct gw_metrics_sched *st,
                       struct buf *out);
/* process_resident_memory_bytes, process_virtual_memory_bytes, process_cpu_seconds_total,
 * process_open_fds, process_start_time_seconds (no model_name label, as client libraries do). */
void gw_metrics_render_process(const struct gw_metrics_proc *p, struct buf *out);

#endif
