/* gw_metrics: counters and fixed-bucket histograms rendered as Prometheus text. */
#include "gw_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"

#include "common/xalloc.h"
#include "common/buf.h"

#define HIST_MAX_BUCKETS 24
#define HTTP_SERIES_MAX 128
#define FINISH_KINDS 4

struct hist {
    const char *name;
    const char *help;
    const double *bounds; /* upper bounds, ascending */
    int n_bounds;
    uint64_t counts[HIST_MAX_BUCKETS]; /* per bucket (not cumulative) */
    uint64_t count;
    double sum;
};

struct http_series {
    char handler[32];
    char method[12];
    int status;
    uint64_t n;
};

static const double lat_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06,  0.08,
                                    0.1,   0.25,  0.5,  0.75, 1.0,  2.5,   5.0,
                                    7.5,   10.0,  20.0, 40.0, 80.0, 160.0, 640.0};
static const double itl_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03,
                                    0.04,  0.05,   0.075, 0.1,  0.15,  0.2,  0.3,   0.4,
                                    0.5,   0.75,   1.0,   2.5,  5.0,   10.0};
static const double tok_bounds[] = {1,    2,    5,    10,    20,    50,    100,    200,   500,
                                    1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000};

static const char *const finish_names[FINISH_KINDS] = {"stop", "length", "abort", "error"};

struct gw_metrics {
    char model[128];
    uint64_t prompt_tokens;
    uint64_t gen_tokens;
    uint64_t finished[FINISH_KINDS];
    struct hist ttft, itl, e2e, queue, req_prompt, req_gen;
    struct http_series http[HTTP_SERIES_MAX];
    int n_http;
};

static void hist_init(struct hist *h, const char *name, const char *help, const double *b, int n)
{
    memset(h, 0, sizeof(*h));
    h->name = name;
    h->help = help;
    h->bounds = b;
    h->n_bounds = n;
}

static void hist_observe(struct hist *h, double v)
{
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i])
        i++;
    h->counts[i]++; /* i == n_bounds: +Inf bucket */
    h->count++;
    h->sum += v;
}

struct gw_metrics *gw_metrics_create(const char *model_name)
{
    struct gw_metrics *m = xcalloc(1, sizeof(*m));
    snprintf(m->model, sizeof(m->model), "%s", model_name);
    hist_init(&m->ttft, "vllm:time_to_first_token_seconds", "Time to first token, seconds.",
              lat_bounds, (int)ARRAY_LEN(lat_bounds));
    hist_init(&m->itl, "vllm:inter_token_latency_seconds", "Inter-token latency, seconds.",
              itl_bounds, (int)ARRAY_LEN(itl_bounds));
    hist_init(&m->e2e, "vllm:e2e_request_latency_seconds", "End-to-end request latency, seconds.",
              lat_bounds, (int)ARRAY_LEN(lat_bounds));
    hist_init(&m->queue, "vllm:request_queue_time_seconds", "Time spent waiting, seconds.",
              lat_bounds, (int)ARRAY_LEN(lat_bounds));
    hist_init(&m->req_prompt, "vllm:request_prompt_tokens", "Prompt tokens per request.",
              tok_bounds, (int)ARRAY_LEN(tok_bounds));
    hist_init(&m->req_gen, "vllm:request_generation_tokens", "Generated tokens per request.",
              tok_bounds, (int)ARRAY_LEN(tok_bounds));
    return m;
}

void gw_metrics_destroy(struct gw_metrics *m)
{
    free(m);
}

void gw_metrics_http(struct gw_metrics *m, const char *handler, const char *method, int status)
{
    if (!m)
        return;
    if (!method)
        method = "OTHER";
    for (int i = 0; i < m->n_http; i++) {
        struct http_series *s = &m->http[i];
        if (s->status == status && strcmp(s->handler, handler) == 0 &&
            strcmp(s->method, method) == 0) {
            s->n++;
            return;
        }
    }
    if (m->n_http == HTTP_SERIES_MAX)
        return; /* bounded cardinality */
    struct http_series *s = &m->http[m->n_http++];
    snprintf(s->handler, sizeof(s->handler), "%s", handler);
    snprintf(s->method, sizeof(s->method), "%s", method);
    s->status = status;
    s->n = 1;
}

void gw_metrics_request(struct gw_metrics *m, const char *finish, int64_t prompt_tokens,
                        int64_t gen_tokens, double ttft_s, double e2e_s, double queue_s)
{
    if (!m)
        return;
    for (int i = 0; i < FINISH_KINDS; i++)
        if (strcmp(finish, finish_names[i]) == 0)
            m->finished[i]++;
    if (prompt_tokens > 0) {
        m->prompt_tokens += (uint64_t)prompt_tokens;
        hist_observe(&m->req_prompt, (double)prompt_tokens);
    }
    if (gen_tokens >= 0) {
        m->gen_tokens += (uint64_t)gen_tokens;
        hist_observe(&m->req_gen, (double)gen_tokens);
    }
    if (ttft_s >= 0)
        hist_observe(&m->ttft, ttft_s);
    if (e2e_s >= 0)
        hist_observe(&m->e2e, e2e_s);
    if (queue_s >= 0)
        hist_observe(&m->queue, queue_s);
}

void gw_metrics_itl(struct gw_metrics *m, double s)
{
    if (m)
        hist_observe(&m->itl, s);
}

static void hist_render(const struct hist *h, const char *model, struct buf *out)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        buf_printf(out, "%s_bucket{model_name=\"%s\",le=\"%g\"} %llu\n", h->name, model,
                      h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    buf_printf(out, "%s_bucket{model_name=\"%s\",le=\"+Inf\"} %llu\n", h->name, model,
                  (unsigned long long)cum);
    buf_printf(out, "%s_sum{model_name=\"%s\"} %.9g\n%s_count{model_name=\"%s\"} %llu\n",
                  h->name, model, h->sum, h->name, model, (unsigned long long)h->count);
}

void gw_metrics_render(const struct gw_metrics *m, const struct gw_metrics_sched *st,
                       struct buf *out)
{
    const char *mn = m->model;
    buf_printf(out,
                  "# HELP vllm:num_requests_running Requests running on workers.\n"
                  "# TYPE vllm:num_requests_running gauge\n"
                  "vllm:num_requests_running{model_name=\"%s\"} %u\n"
                  "# HELP vllm:num_requests_waiting Requests waiting in the queue.\n"
                  "# TYPE vllm:num_requests_waiting gauge\n"
                  "vllm:num_requests_waiting{model_name=\"%s\"} %u\n"
                  "# HELP vllm:kv_cache_usage_perc KV cache usage, 0 to 1.\n"
                  "# TYPE vllm:kv_cache_usage_perc gauge\n"
                  "vllm:kv_cache_usage_perc{model_name=\"%s\"} %.6g\n"
                  "# HELP tern:scheduler_up 1 when the scheduler link is alive.\n"
                  "# TYPE tern:scheduler_up gauge\n"
                  "tern:scheduler_up{model_name=\"%s\"} %d\n"
                  "# HELP tern:workers_ready Workers ready to serve.\n"
                  "# TYPE tern:workers_ready gauge\n"
                  "tern:workers_ready{model_name=\"%s\"} %u\n",
                  mn, st->running, mn, st->waiting, mn, st->kv_usage, mn, st->up ? 1 : 0, mn,
                  st->workers_ready);
    buf_printf(out,
                  "# HELP vllm:prompt_tokens_total Prompt tokens processed.\n"
                  "# TYPE vllm:prompt_tokens_total counter\n"
                  "vllm:prompt_tokens_total{model_name=\"%s\"} %llu\n"
                  "# HELP vllm:generation_tokens_total Tokens generated.\n"
                  "# TYPE vllm:generation_tokens_total counter\n"
                  "vllm:generation_tokens_total{model_name=\"%s\"} %llu\n"
                  "# HELP vllm:request_success_total Finished requests by finish reason.\n"
                  "# TYPE vllm:request_success_total counter\n",
                  mn, (unsigned long long)m->prompt_tokens, mn, (unsigned long long)m->gen_tokens);
    for (int i = 0; i < FINISH_KINDS; i++)
        buf_printf(out,
                      "vllm:request_success_total{model_name=\"%s\",finished_reason=\"%s\"} %llu\n",
                      mn, finish_names[i], (unsigned long long)m->finished[i]);
    hist_render(&m->ttft, mn, out);
    hist_render(&m->itl, mn, out);
    hist_render(&m->e2e, mn, out);
    hist_render(&m->queue, mn, out);
    hist_render(&m->req_prompt, mn, out);
    hist_render(&m->req_gen, mn, out);
    buf_printf(out,
                  "# HELP vllm:num_preemptions_total Preempted requests (reported by workers).\n"
                  "# TYPE vllm:num_preemptions_total counter\n"
                  "vllm:num_preemptions_total{model_name=\"%s\"} %llu\n"
                  "# HELP vllm:spec_decode_num_drafts_total Speculative draft rounds.\n"
                  "# TYPE vllm:spec_decode_num_drafts_total counter\n"
                  "vllm:spec_decode_num_drafts_total{model_name=\"%s\"} %llu\n"
                  "# HELP vllm:spec_decode_num_draft_tokens_total Draft tokens proposed.\n"
                  "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
                  "vllm:spec_decode_num_draft_tokens_total{model_name=\"%s\"} %llu\n"
                  "# HELP vllm:spec_decode_num_accepted_tokens_total Draft tokens accepted.\n"
                  "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
                  "vllm:spec_decode_num_accepted_tokens_total{model_name=\"%s\"} %llu\n"
                  "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted draft "
                  "tokens by draft position.\n"
                  "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n",
                  mn, (unsigned long long)st->num_preemptions, mn,
                  (unsigned long long)st->spec_drafts, mn,
                  (unsigned long long)st->spec_draft_tokens, mn,
                  (unsigned long long)st->spec_accepted_tokens);
    for (int i = 0; st->spec_accepted_per_pos && i < st->n_spec_pos; i++)
        buf_printf(out,
                      "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"%s\","
                      "position=\"%d\"} %llu\n",
                      mn, i, (unsigned long long)st->spec_accepted_per_pos[i]);
    buf_puts(out, "# HELP http_requests_total HTTP responses by handler, method, status.\n"
                     "# TYPE http_requests_total counter\n");
    for (int i = 0; i < m->n_http; i++)
        buf_printf(out, "http_requests_total{handler=\"%s\",method=\"%s\",status=\"%d\"} %llu\n",
                      m->http[i].handler, m->http[i].method, m->http[i].status,
                      (unsigned long long)m->http[i].n);
}

int gw_metrics_process_read(struct gw_metrics_proc *p)
{
    memset(p, 0, sizeof(*p));
    p->open_fds = -1;
    int rc = 0;
    long page = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long vsz = 0, rss = 0;
    if (f && fscanf(f, "%llu %llu", &vsz, &rss) == 2) {
        p->vsize_bytes = (double)vsz * (double)page;
        p->rss_bytes = (double)rss * (double)page;
    } else {
        rc = ERR_IO;
    }
    if (f)
        fclose(f);
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                n++;
        closedir(d);
        p->open_fds = n - 1; /* minus the directory's own fd */
    } else {
        rc = ERR_IO;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        p->cpu_seconds = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    /* start time: field 22 of /proc/self/stat (clock ticks after boot) + boot time */
    f = fopen("/proc/self/stat", "r");
    char buf[1024];
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *q = strrchr(buf, ')');
    unsigned long long start_ticks = 0;
    if (q && sscanf(q + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
                    "%*d %llu",
                    &start_ticks) == 1) {
        FILE *s = fopen("/proc/stat", "r");
        char line[256];
        unsigned long long btime = 0;
        while (s && fgets(line, sizeof(line), s))
            if (sscanf(line, "btime %llu", &btime) == 1)
                break;
        if (s)
            fclose(s);
        long hz = sysconf(_SC_CLK_TCK);
        if (btime && hz > 0)
            p->start_time_s = (double)btime + (double)start_ticks / (double)hz;
    }
    return rc;
}

void gw_metrics_render_process(const struct gw_metrics_proc *p, struct buf *out)
{
    buf_printf(out,
                  "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                  "# TYPE process_resident_memory_bytes gauge\n"
                  "process_resident_memory_bytes %.0f\n"
                  "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                  "# TYPE process_virtual_memory_bytes gauge\n"
                  "process_virtual_memory_bytes %.0f\n"
                  "# HELP process_cpu_seconds_total User and system CPU time, seconds.\n"
                  "# TYPE process_cpu_seconds_total counter\n"
                  "process_cpu_seconds_total %.6f\n",
                  p->rss_bytes, p->vsize_bytes, p->cpu_seconds);
    if (p->open_fds >= 0)
        buf_printf(out,
                      "# HELP process_open_fds Number of open file descriptors.\n"
                      "# TYPE process_open_fds gauge\nprocess_open_fds %d\n",
                      p->open_fds);
    if (p->start_time_s > 0)
        buf_printf(out,
                      "# HELP process_start_time_seconds Start time since the epoch, seconds.\n"
                      "# TYPE process_start_time_seconds gauge\n"
                      "process_start_time_seconds %.2f\n",
                      p->start_time_s);
}
