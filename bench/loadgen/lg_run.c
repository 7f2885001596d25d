/* lg_run: drive one benchmark point on a libuv loop and summarise it. Timing per request:
 * t0 = just before connect; TTFT = first chunk with output text; ITL = gaps between later
 * text chunks, each divided by the average tokens per chunk when the final usage reports more
 * tokens than chunks (the gateway sends usage only at the end); e2e = the end of the stream. */
#include "loadgen/lg_run.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "loadgen/lg_prompt.h"
#include "loadgen/lg_sse.h"

#define ERRBODY_MAX 512

struct run;

struct rq {
    struct run *run;
    uint64_t t0, t_first, t_last, t_end;
    int status;
    struct lg_sse sse;
    struct lg_vec gaps; /* ns between text chunks */
    int n_chunks;
    int usage_prompt, usage_completion; /* -1 = not seen */
    bool got_done;
    char err[200];
    char errbody[ERRBODY_MAX];
    size_t errbody_len;
};

struct run {
    const struct lg_cfg *cfg;
    uv_loop_t loop;
    uv_timer_t arrival;
    char **bodies;
    int n_bodies;
    uint64_t rng;
    uint64_t t_start, t_stop_issue, t_last_done;
    int issued, inflight, pending;
    bool arrivals_over;
    bool start_failed; /* a request could not even start (e.g. out of fds): issue no more */
    /* results */
    int completed, failed;
    char first_error[256];
    long long prompt_tokens, output_tokens;
    int plen_min, plen_max;
    struct lg_vec ttft, itl, tpot, e2e, decode, prefill;
};

static const char *path_of(const struct lg_cfg *c)
{
    return c->endpoint == LG_ENDPOINT_CHAT ? "/v1/chat/completions" : "/v1/completions";
}

static bool issue_allowed(struct run *r)
{
    const struct lg_cfg *c = r->cfg;
    if (c->requests > 0 && r->issued + r->pending >= c->requests)
        return false;
    if (c->duration_s > 0 && clock_now_ns() >= r->t_stop_issue)
        return false;
    return !r->start_failed;
}

// ---- one request's stream ----

__attribute__((format(printf, 2, 3))) static void rq_fail(struct rq *q, const char *fmt, ...)
{
    if (q->err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->err, sizeof(q->err), fmt, ap);
    va_end(ap);
}

static bool has_text(cJSON *c0)
{
    cJSON *t = cJSON_GetObjectItemCaseSensitive(c0, "text");
    if (cJSON_IsString(t) && t->valuestring[0])
        return true;
    cJSON *d = cJSON_GetObjectItemCaseSensitive(c0, "delta");
    if (!cJSON_IsObject(d))
        return false;
    static const char *const keys[] = {"content", "reasoning_content", "tool_calls"};
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(d, keys[i]);
        if ((cJSON_IsString(v) && v->valuestring[0]) || (cJSON_IsArray(v) && cJSON_GetArraySize(v)))
            return true;
    }
    return false;
}

static void on_event(void *ud, const char *data, size_t n)
{
    struct rq *q = ud;
    uint64_t now = clock_now_ns();
    (void)n;
    if (strcmp(data, "[DONE]") == 0) {
        q->got_done = true;
        return;
    }
    cJSON *j = cJSON_Parse(data);
    if (!j) {
        rq_fail(q, "bad SSE event: %.120s", data);
        return;
    }
    cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (e) {
        cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
        rq_fail(q, "stream error: %.160s", cJSON_IsString(m) ? m->valuestring : "(no message)");
    }
    cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (cJSON_IsObject(u)) {
        cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
        cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
        if (cJSON_IsNumber(pt))
            q->usage_prompt = (int)pt->valuedouble;
        if (cJSON_IsNumber(ct))
            q->usage_completion = (int)ct->valuedouble;
    }
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    if (c0 && has_text(c0)) {
        if (q->n_chunks == 0)
            q->t_first = now;
        else
            lg_vec_push(&q->gaps, (double)(now - q->t_last));
        q->t_last = now;
        q->n_chunks++;
    }
    cJSON_Delete(j);
}

static void rq_head(void *ud, int status)
{
    ((struct rq *)ud)->status = status;
}

static void rq_body(void *ud, const char *p, size_t n)
{
    struct rq *q = ud;
    if (q->status == 200) {
        lg_sse_feed(&q->sse, p, n, on_event, q);
        return;
    }
    size_t room = sizeof(q->errbody) - 1 - q->errbody_len;
    size_t k = n < room ? n : room;
    memcpy(q->errbody + q->errbody_len, p, k);
    q->errbody_len += k;
    q->errbody[q->errbody_len] = '\0';
}

/* the error text of a non-200 JSON body */
static void status_error(struct rq *q)
{
    char msg[200];
    snprintf(msg, sizeof(msg), "%.160s", q->errbody);
    cJSON *j = cJSON_Parse(q->errbody);
    cJSON *m =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message");
    if (cJSON_IsString(m))
        snprintf(msg, sizeof(msg), "%.160s", m->valuestring);
    cJSON_Delete(j);
    snprintf(q->err, sizeof(q->err), "HTTP %d: %.160s", q->status, msg);
}

/* a finished request into the run's samples */
static void rq_account(struct run *r, struct rq *q)
{
    int out = q->usage_completion >= 0 ? q->usage_completion : q->n_chunks;
    int prompt = q->usage_prompt >= 0 ? q->usage_prompt : r->cfg->prompt_len;
    double ttft = (double)(q->t_first - q->t0) / 1e9;
    double e2e = (double)(q->t_end - q->t0) / 1e9;
    r->completed++;
    r->prompt_tokens += prompt;
    r->output_tokens += out;
    if (r->completed == 1 || prompt < r->plen_min)
        r->plen_min = prompt;
    if (r->completed == 1 || prompt > r->plen_max)
        r->plen_max = prompt;
    lg_vec_push(&r->ttft, ttft * 1e3);
    lg_vec_push(&r->e2e, e2e * 1e3);
    if (ttft > 0)
        lg_vec_push(&r->prefill, prompt / ttft);
    if (out > 1 && e2e > ttft) {
        lg_vec_push(&r->tpot, (e2e - ttft) * 1e3 / (out - 1));
        lg_vec_push(&r->decode, (out - 1) / (e2e - ttft));
    }
    /* tokens per gap: all but the first token arrive after the first chunk */
    double per_gap = 1.0;
    if (q->gaps.n > 0 && out - 1 > (int)q->gaps.n)
        per_gap = (double)(out - 1) / (double)q->gaps.n;
    for (size_t i = 0; i < q->gaps.n; i++)
        lg_vec_push(&r->itl, q->gaps.v[i] / 1e6 / per_gap);
}

static void issue(struct run *r);

static void rq_done(void *ud, int rc, const char *err)
{
    struct rq *q = ud;
    struct run *r = q->run;
    q->t_end = clock_now_ns();
    r->t_last_done = q->t_end;
    if (rc < 0)
        rq_fail(q, "%s", err && err[0] ? err : err_str(rc));
    else if (q->status != 200)
        status_error(q);
    else if (!q->got_done)
        rq_fail(q, "%s", "stream ended without [DONE]");
    else if (q->n_chunks == 0)
        rq_fail(q, "%s", "no output text in the stream");
    if (q->err[0]) {
        r->failed++;
        if (!r->first_error[0])
            snprintf(r->first_error, sizeof(r->first_error), "%s", q->err);
    } else {
        rq_account(r, q);
    }
    lg_sse_deinit(&q->sse);
    lg_vec_deinit(&q->gaps);
    free(q);
    r->inflight--;
    if (r->pending > 0) {
        r->pending--;
        issue(r);
    } else if (r->cfg->rate <= 0 && issue_allowed(r)) {
        issue(r);
    }
}

static void issue(struct run *r)
{
    struct rq *q = xcalloc(1, sizeof(*q));
    q->run = r;
    q->usage_prompt = q->usage_completion = -1;
    lg_sse_init(&q->sse);
    lg_vec_init(&q->gaps);
    const char *body = r->bodies[r->issued % r->n_bodies];
    r->issued++;
    r->inflight++;
    q->t0 = clock_now_ns();
    static const struct lg_http_cbs cbs = {rq_head, rq_body, rq_done};
    int rc = lg_http_start(&r->loop, &r->cfg->url, "POST", path_of(r->cfg), body,
                           r->cfg->timeout_ms, &cbs, q);
    if (rc < 0) {
        r->start_failed = true; /* no re-issue from inside rq_done: no recursion */
        r->pending = 0;
        rq_done(q, rc, uv_strerror(rc));
    }
}

// ---- arrivals (rate mode) ----

static uint64_t next_gap_ms(struct run *r)
{
    double u = (double)(lg_prompt_rand(&r->rng) >> 11) / 9007199254740992.0;
    double s = -log(1.0 - u) / r->cfg->rate;
    return (uint64_t)(s * 1e3 + 0.5);
}

static void on_arrival(uv_timer_t *t)
{
    struct run *r = t->data;
    if (!issue_allowed(r)) {
        r->arrivals_over = true;
        uv_close((uv_handle_t *)t, NULL);
        return;
    }
    if (r->cfg->concurrency > 0 && r->inflight >= r->cfg->concurrency)
        r->pending++;
    else
        issue(r);
    if (r->cfg->requests > 0 && r->issued + r->pending >= r->cfg->requests) {
        r->arrivals_over = true;
        uv_close((uv_handle_t *)t, NULL);
        return;
    }
    uv_timer_start(t, on_arrival, next_gap_ms(r), 0);
}

// ---- summary ----

static void summarise(struct run *run, struct lg_result *res)
{
    memset(res, 0, sizeof(*res));
    res->requests = run->issued;
    res->completed = run->completed;
    res->failed = run->failed;
    snprintf(res->first_error, sizeof(res->first_error), "%s", run->first_error);
    res->duration_s =
        run->t_last_done > run->t_start ? (double)(run->t_last_done - run->t_start) / 1e9 : 0;
    res->prompt_tokens = run->prompt_tokens;
    res->output_tokens = run->output_tokens;
    res->prompt_len_min = run->plen_min;
    res->prompt_len_max = run->plen_max;
    if (res->duration_s > 0) {
        res->req_per_s = run->completed / res->duration_s;
        res->output_tok_per_s = (double)run->output_tokens / res->duration_s;
        res->total_tok_per_s = (double)(run->output_tokens + run->prompt_tokens) / res->duration_s;
    }
    stats_dist(run->ttft.v, run->ttft.n, &res->ttft_ms);
    stats_dist(run->itl.v, run->itl.n, &res->itl_ms);
    stats_dist(run->tpot.v, run->tpot.n, &res->tpot_ms);
    stats_dist(run->e2e.v, run->e2e.n, &res->e2e_ms);
    stats_dist(run->decode.v, run->decode.n, &res->decode_tok_s);
    stats_dist(run->prefill.v, run->prefill.n, &res->prefill_tok_s);
}

int lg_run(const struct lg_cfg *c, struct lg_result *res, char *err, size_t errlen)
{
    struct run run;
    memset(&run, 0, sizeof(run));
    run.cfg = c;
    if (c->prompt_len < 1 || c->output_len < 1 || (c->requests <= 0 && c->duration_s <= 0) ||
        (c->rate <= 0 && c->concurrency < 1)) {
        snprintf(err, errlen, "bad run configuration");
        return ERR_INVAL;
    }
    run.n_bodies = c->requests > 0 ? c->requests : LG_PROMPT_POOL_MAX;
    if (run.n_bodies > LG_PROMPT_POOL_MAX && c->endpoint == LG_ENDPOINT_CHAT)
        run.n_bodies = LG_PROMPT_POOL_MAX; /* each chat prompt costs /tokenize round trips */
    int rc = lg_prompt_build(c, run.n_bodies, &run.bodies, err, errlen);
    if (rc < 0)
        return rc;
    rc = uv_loop_init(&run.loop);
    if (rc < 0) {
        snprintf(err, errlen, "uv_loop_init: %s", uv_strerror(rc));
        goto out_prompts;
    }
    run.rng = c->seed ^ 0x5851f42d4c957f2dull;
    lg_vec_init(&run.ttft);
    lg_vec_init(&run.itl);
    lg_vec_init(&run.tpot);
    lg_vec_init(&run.e2e);
    lg_vec_init(&run.decode);
    lg_vec_init(&run.prefill);
    run.t_start = clock_now_ns();
    run.t_stop_issue = run.t_start + (uint64_t)(c->duration_s * 1e9);
    if (c->rate > 0) {
        uv_timer_init(&run.loop, &run.arrival);
        run.arrival.data = &run;
        on_arrival(&run.arrival); /* the first request goes at t = 0 */
    } else {
        for (int i = 0; i < c->concurrency && issue_allowed(&run); i++)
            issue(&run);
    }
    uv_run(&run.loop, UV_RUN_DEFAULT);
    uv_loop_close(&run.loop);
    summarise(&run, res);
    lg_vec_deinit(&run.ttft);
    lg_vec_deinit(&run.itl);
    lg_vec_deinit(&run.tpot);
    lg_vec_deinit(&run.e2e);
    lg_vec_deinit(&run.decode);
    lg_vec_deinit(&run.prefill);
    rc = 0;
out_prompts:
    lg_prompt_free(run.bodies, run.n_bodies);
    return rc;
}
