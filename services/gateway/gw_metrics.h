/* gw_metrics: the gateway's Prometheus registry, with vLLM's metric names (ECOSYSTEM.md §A.5),
 * every series labelled model_name. Loop thread only. Gauges that the scheduler owns (running,
 * waiting, KV usage) are passed in at render time from its latest status snapshot. */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stdbool.h>
#include <stdint.h>

struct gw_buf;
struct gw_metrics;

/* What the scheduler last told us (all zero when unknown). */
struct gw_metrics_sched {
    bool up; /* scheduler link alive */
    uint32_t workers_ready;
    uint32_t running;
    uint32_t waiting;
    double kv_usage; /* 0..1 */
};

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
                       struct gw_buf *out);

#endif
