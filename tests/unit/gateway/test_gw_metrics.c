/* gw_metrics: the Prometheus text carries vLLM's names with model_name, cumulative buckets,
 * counters by finished_reason, and the scheduler gauges passed in. */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "gw_metrics.h"
#include "test.h"

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

int main(void)
{
    struct gw_metrics *m = gw_metrics_create("mymodel");
    gw_metrics_request(m, "stop", 10, 5, 0.003, 0.2, 0.001);
    gw_metrics_request(m, "length", 20, 7, 0.5, 3.0, -1);
    gw_metrics_request(m, "abort", 4, 1, -1, 0.1, -1);
    gw_metrics_itl(m, 0.012);
    gw_metrics_http(m, "/health", "GET", 200);
    gw_metrics_http(m, "/health", "GET", 200);
    gw_metrics_http(m, "/health", "GET", 503);
    struct gw_metrics_sched st = {
        .up = true, .workers_ready = 2, .running = 3, .waiting = 1, .kv_usage = 0.25};
    struct buf b;
    buf_init(&b);
    gw_metrics_render(m, &st, &b);
    const char *t = b.data;
    CHECK(has_line(t, "vllm:num_requests_running{model_name=\"mymodel\"} 3"));
    CHECK(has_line(t, "vllm:num_requests_waiting{model_name=\"mymodel\"} 1"));
    CHECK(has_line(t, "vllm:kv_cache_usage_perc{model_name=\"mymodel\"} 0.25"));
    CHECK(has_line(t, "vllm:prompt_tokens_total{model_name=\"mymodel\"} 34"));
    CHECK(has_line(t, "vllm:generation_tokens_total{model_name=\"mymodel\"} 13"));
    CHECK(has_line(
        t, "vllm:request_success_total{model_name=\"mymodel\",finished_reason=\"stop\"} 1"));
    CHECK(has_line(
        t, "vllm:request_success_total{model_name=\"mymodel\",finished_reason=\"length\"} 1"));
    CHECK(has_line(
        t, "vllm:request_success_total{model_name=\"mymodel\",finished_reason=\"abort\"} 1"));
    CHECK(has_line(t, "# TYPE vllm:time_to_first_token_seconds histogram"));
    /* ttft: 0.003 and 0.5 observed; le=0.005 holds 1, le=0.5 holds 2 (cumulative), +Inf 2 */
    CHECK(has_line(
        t, "vllm:time_to_first_token_seconds_bucket{model_name=\"mymodel\",le=\"0.001\"} 0"));
    CHECK(has_line(
        t, "vllm:time_to_first_token_seconds_bucket{model_name=\"mymodel\",le=\"0.005\"} 1"));
    CHECK(has_line(t,
                   "vllm:time_to_first_token_seconds_bucket{model_name=\"mymodel\",le=\"0.5\"} 2"));
    CHECK(has_line(
        t, "vllm:time_to_first_token_seconds_bucket{model_name=\"mymodel\",le=\"+Inf\"} 2"));
    CHECK(has_line(t, "vllm:time_to_first_token_seconds_count{model_name=\"mymodel\"} 2"));
    CHECK(has_line(t, "vllm:e2e_request_latency_seconds_count{model_name=\"mymodel\"} 3"));
    CHECK(has_line(t, "vllm:inter_token_latency_seconds_count{model_name=\"mymodel\"} 1"));
    CHECK(has_line(t, "http_requests_total{handler=\"/health\",method=\"GET\",status=\"200\"} 2"));
    CHECK(has_line(t, "http_requests_total{handler=\"/health\",method=\"GET\",status=\"503\"} 1"));
    /* every non-comment line is "name{labels} value" */
    for (const char *p = t; *p;) {
        const char *e = strchr(p, '\n');
        CHECK(e != NULL);
        if (!e)
            break;
        if (*p != '#') {
            const char *sp = memchr(p, ' ', (size_t)(e - p));
            CHECK(sp != NULL && memchr(p, '{', (size_t)(e - p)) != NULL);
        }
        p = e + 1;
    }
    /* counters the scheduler does not report yet render as 0; per-position series as given */
    CHECK(has_line(t, "vllm:num_preemptions_total{model_name=\"mymodel\"} 0"));
    CHECK(has_line(t, "vllm:spec_decode_num_drafts_total{model_name=\"mymodel\"} 0"));
    buf_reset(&b);
    uint64_t per_pos[2] = {7, 3};
    struct gw_metrics_sched st2 = {.num_preemptions = 4,
                                   .spec_drafts = 9,
                                   .spec_draft_tokens = 18,
                                   .spec_accepted_tokens = 10,
                                   .spec_accepted_per_pos = per_pos,
                                   .n_spec_pos = 2};
    gw_metrics_render(m, &st2, &b);
    t = b.data;
    CHECK(has_line(t, "vllm:num_preemptions_total{model_name=\"mymodel\"} 4"));
    CHECK(has_line(t, "vllm:spec_decode_num_draft_tokens_total{model_name=\"mymodel\"} 18"));
    CHECK(has_line(t, "vllm:spec_decode_num_accepted_tokens_total{model_name=\"mymodel\"} 10"));
    CHECK(has_line(t, "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"mymodel\","
                      "position=\"1\"} 3"));
    /* process metrics: this process has stdin/out/err open and some resident memory */
    struct gw_metrics_proc pr;
    CHECK_EQ_INT(gw_metrics_process_read(&pr), 0);
    CHECK(pr.rss_bytes > 100000);
    CHECK(pr.open_fds >= 3);
    CHECK(pr.start_time_s > 1.6e9);
    buf_reset(&b);
    gw_metrics_render_process(&pr, &b);
    CHECK(strstr(b.data, "\nprocess_open_fds ") != NULL);
    CHECK(strncmp(b.data, "# HELP process_resident_memory_bytes", 36) == 0);
    buf_deinit(&b);
    gw_metrics_destroy(m);
    return test_result();
}
