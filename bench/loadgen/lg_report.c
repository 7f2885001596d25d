/* lg_report: text, JSON and a gnuplot chart for benchmark points. */
#include "loadgen/lg_report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"

static const char *endpoint_name(enum lg_endpoint e)
{
    return e == LG_ENDPOINT_CHAT ? "chat" : "completions";
}

static void print_dist(FILE *f, const char *name, const struct stats_dist *d)
{
    fprintf(f, "%-26s mean %10.2f  p50 %10.2f  p90 %10.2f  p99 %10.2f\n", name, d->mean, d->p50,
            d->p90, d->p99);
}

void lg_report_print(FILE *f, const struct lg_cfg *c, const struct lg_result *r)
{
    fprintf(f, "============ tern bench: %s, prompt %d, output %d, ", endpoint_name(c->endpoint),
            c->prompt_len, c->output_len);
    if (c->rate > 0)
        fprintf(f, "rate %.3g/s", c->rate);
    if (c->rate > 0 && c->concurrency > 0)
        fprintf(f, ", ");
    if (c->concurrency > 0)
        fprintf(f, "concurrency %d", c->concurrency);
    fprintf(f, " ============\n");
    fprintf(f, "%-26s %d\n", "requests", r->requests);
    fprintf(f, "%-26s %d\n", "completed", r->completed);
    fprintf(f, "%-26s %d%s%s\n", "failed", r->failed, r->failed ? "  first error: " : "",
            r->failed ? r->first_error : "");
    fprintf(f, "%-26s %.3f\n", "duration (s)", r->duration_s);
    fprintf(f, "%-26s %lld (per request %d..%d)\n", "prompt tokens", r->prompt_tokens,
            r->prompt_len_min, r->prompt_len_max);
    fprintf(f, "%-26s %lld\n", "output tokens", r->output_tokens);
    fprintf(f, "%-26s %.3f\n", "request throughput (/s)", r->req_per_s);
    fprintf(f, "%-26s %.2f\n", "output tokens/s", r->output_tok_per_s);
    fprintf(f, "%-26s %.2f\n", "total tokens/s", r->total_tok_per_s);
    print_dist(f, "TTFT (ms)", &r->ttft_ms);
    print_dist(f, "ITL (ms)", &r->itl_ms);
    print_dist(f, "TPOT (ms)", &r->tpot_ms);
    print_dist(f, "E2E latency (ms)", &r->e2e_ms);
    print_dist(f, "decode tok/s per stream", &r->decode_tok_s);
    print_dist(f, "prefill tok/s", &r->prefill_tok_s);
}

static void add_dist(cJSON *o, const char *name, const struct stats_dist *d)
{
    cJSON *j = cJSON_AddObjectToObject(o, name);
    cJSON_AddNumberToObject(j, "n", (double)d->n);
    cJSON_AddNumberToObject(j, "mean", d->mean);
    cJSON_AddNumberToObject(j, "min", d->min);
    cJSON_AddNumberToObject(j, "p50", d->p50);
    cJSON_AddNumberToObject(j, "p90", d->p90);
    cJSON_AddNumberToObject(j, "p99", d->p99);
    cJSON_AddNumberToObject(j, "max", d->max);
}

cJSON *lg_report_point_json(const struct lg_cfg *c, const struct lg_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *cfg = cJSON_AddObjectToObject(o, "config");
    cJSON_AddStringToObject(cfg, "endpoint", endpoint_name(c->endpoint));
    cJSON_AddStringToObject(cfg, "model", c->model);
    cJSON_AddNumberToObject(cfg, "prompt_len", c->prompt_len);
    cJSON_AddNumberToObject(cfg, "output_len", c->output_len);
    cJSON_AddNumberToObject(cfg, "concurrency", c->concurrency);
    cJSON_AddNumberToObject(cfg, "rate", c->rate);
    cJSON_AddNumberToObject(cfg, "requests", c->requests);
    cJSON_AddNumberToObject(cfg, "duration_s", c->duration_s);
    if (c->temperature >= 0)
        cJSON_AddNumberToObject(cfg, "temperature", c->temperature);
    else
        cJSON_AddNullToObject(cfg, "temperature");
    cJSON_AddBoolToObject(cfg, "ignore_eos", c->ignore_eos);
    cJSON_AddNumberToObject(cfg, "seed", (double)c->seed);
    cJSON_AddNumberToObject(o, "requests", r->requests);
    cJSON_AddNumberToObject(o, "completed", r->completed);
    cJSON_AddNumberToObject(o, "failed", r->failed);
    if (r->first_error[0])
        cJSON_AddStringToObject(o, "first_error", r->first_error);
    else
        cJSON_AddNullToObject(o, "first_error");
    cJSON_AddNumberToObject(o, "duration_s", r->duration_s);
    cJSON_AddNumberToObject(o, "prompt_tokens", (double)r->prompt_tokens);
    cJSON_AddNumberToObject(o, "output_tokens", (double)r->output_tokens);
    cJSON_AddNumberToObject(o, "prompt_len_min", r->prompt_len_min);
    cJSON_AddNumberToObject(o, "prompt_len_max", r->prompt_len_max);
    cJSON_AddNumberToObject(o, "request_throughput", r->req_per_s);
    cJSON_AddNumberToObject(o, "output_throughput", r->output_tok_per_s);
    cJSON_AddNumberToObject(o, "total_token_throughput", r->total_tok_per_s);
    add_dist(o, "ttft_ms", &r->ttft_ms);
    add_dist(o, "itl_ms", &r->itl_ms);
    add_dist(o, "tpot_ms", &r->tpot_ms);
    add_dist(o, "e2e_ms", &r->e2e_ms);
    add_dist(o, "decode_tok_s", &r->decode_tok_s);
    add_dist(o, "prefill_tok_s", &r->prefill_tok_s);
    return o;
}

int lg_report_plot(const char *png, const char *xlabel, const double *x, const struct lg_result *r,
                   size_t n, int logx, char *err, size_t errlen)
{
    /* the script goes to gnuplot's stdin; data inline as a here-document block */
    FILE *g = popen("gnuplot 2>&1", "w");
    if (!g) {
        snprintf(err, errlen, "cannot run gnuplot: %s", strerror(errno));
        return -errno;
    }
    fprintf(g, "set terminal pngcairo size 1000,600 noenhanced\n");
    fprintf(g, "set output '%s'\n", png);
    fprintf(g, "set title 'tern bench: output tok/s and ITL p50 vs %s'\n", xlabel);
    fprintf(g, "set xlabel '%s'\nset ylabel 'output tokens/s'\nset y2label 'ITL p50 (ms)'\n",
            xlabel);
    fprintf(g, "set ytics nomirror\nset y2tics\nset grid\nset key top left\n");
    fprintf(g, "set yrange [0:*]\nset y2range [0:*]\n");
    if (logx)
        fprintf(g, "set logscale x 2\n");
    fprintf(g, "$d << EOD\n");
    for (size_t i = 0; i < n; i++)
        fprintf(g, "%.9g %.9g %.9g\n", x[i], r[i].output_tok_per_s, r[i].itl_ms.p50);
    fprintf(g, "EOD\n");
    fprintf(g, "plot $d using 1:2 axes x1y1 with linespoints lw 2 title 'output tok/s', "
               "$d using 1:3 axes x1y2 with linespoints lw 2 title 'ITL p50 (ms)'\n");
    int st = pclose(g);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(err, errlen, "gnuplot failed (status %d)", st);
        return ERR_IO;
    }
    if (access(png, F_OK) != 0) {
        snprintf(err, errlen, "gnuplot wrote no %s", png);
        return ERR_IO;
    }
    return 0;
}
