/* gw_openai: one generation request from parsed body to the last SSE byte.
 *   parse (loop) -> render + tokenize (threadpool) -> context check, Submit (loop)
 *   -> TokenEvents through gw_out -> Finish / Error -> response.
 * The gen state lives in the exchange's arena; the exchange holds the route's ref until the
 * response is done, and the threadpool work holds one more while it runs. */
#include "gw_openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "gw.h"
#include "gw_arena.h"
#include "common/buf.h"
#include "gw_lps.h"
#include "gw_metrics.h"
#include "gw_out.h"
#include "gw_sched.h"
#include "gw_sse.h"
#include "gw_text.h"
#include "proto/tern.pb-c.h"

enum gen_op {
    GEN_OP_GENERATE = 0,
    GEN_OP_TOKENIZE,
};

struct gen;

/* One choice (n > 1 gives several): an independent sequence at the scheduler with its own
 * output pipeline. */
struct choice {
    struct gen *g;
    int index;       /* choices[].index */
    uint64_t req_id; /* its scheduler request */
    bool submitted;  /* the scheduler still runs it */
    bool finished;
    const char *finish;  /* finish_reason once finished */
    uint32_t completion; /* completion tokens once finished */
    struct gw_out out;
    struct gw_out_delta delta;
    bool out_init;
    /* accumulated (non-stream) */
    struct buf all_reasoning;
    struct buf all_content;
    struct gw_lps lps; /* logprobs of the completion tokens, when asked */
    /* stop_reason, as vLLM: the stop string or stop_token_ids id that ended it, else null */
    int stop_index;        /* index in req.stop of the matched stop string, -1 none */
    int64_t stop_token_id; /* the stop token of a Finish, -1 none */
};

struct gen {
    struct gw *gw;
    struct gw_exch *x;
    enum gen_op op;
    struct gw_req req;
    uv_work_t work;
    /* threadpool results */
    int32_t *ids; /* prompt ids (malloc'd; freed by the arena cleanup) */
    size_t n_ids;
    int work_rc;
    char work_err[512];
    /* running */
    bool started;  /* submitted (req_id of the first choice set) */
    bool finished; /* the response is complete (or failed) */
    int n_done;    /* choices finished */
    char id[96];   /* "chatcmpl-..." / "cmpl-..." */
    long long created;
    const char *model;
    struct choice *ch; /* (n_ch) one per choice (arena), set once the body parsed */
    int n_ch;
    uint32_t prompt_tokens;
    uint64_t t_first_ns, t_last_ns;
    bool prompt_thinking; /* the rendered prompt ends inside <think> */
    char *tools_json; /* request tools as JSON text (arena) or NULL */
    /* SSE keep-alive: ": ping" when a stream was quiet for cfg->sse_ping_ms (long prefill) */
    uv_timer_t ping;
    bool ping_on;
    uint64_t t_sent_ns; /* last bytes of this stream, or submit time */
    const struct gw_openai_sink *sink; /* NULL: chat / completions JSON */
};

static void gen_cleanup(void *p)
{
    struct gen *g = p;
    free(g->ids);
    for (int i = 0; i < g->n_ch; i++) {
        struct choice *ch = &g->ch[i];
        gw_lps_deinit(&ch->lps);
        if (ch->out_init) {
            gw_out_deinit(&ch->out);
            gw_out_delta_deinit(&ch->delta);
        }
        buf_deinit(&ch->all_reasoning);
        buf_deinit(&ch->all_content);
    }
}

int64_t gw_openai_max_model_len(const struct gw *gw)
{
    struct gw_sched_status st;
    gw_sched_status_get(gw->sched, &st);
    return st.max_model_len ? (int64_t)st.max_model_len : gw->cfg->max_model_len;
}

const char *gw_openai_model(const struct gw *gw)
{
    return gw->cfg->model_name;
}

static void retry_after_hdr(const struct gw *gw, uint32_t ms, char *buf, size_t n)
{
    unsigned s = ms ? (ms + 999) / 1000 : (unsigned)gw->cfg->retry_after_s;
    snprintf(buf, n, "Retry-After: %u\r\n", s ? s : 1);
}

static void unavailable(struct gw_exch *x, const char *code, const char *msg, uint32_t ms)
{
    char hdr[64];
    retry_after_hdr(x->gw, ms, hdr, sizeof(hdr));
    gw_exch_error(x, 503, "server_error", NULL, code, hdr, "%s", msg);
}

/* the request's name for a chat parameter */
static const char *param_of(const struct gen *g, const char *p)
{
    return p && g->sink && g->sink->param ? g->sink->param(p) : p;
}

static void req_error(struct gw_exch *x, const struct gw_req_err *e)
{
    gw_exch_error(x, e->status, e->type, param_of(x->ctx, e->param), e->code, NULL, "%s",
                  e->message);
}

// ---- JSON bodies ----

static cJSON *usage_json(uint32_t prompt, uint32_t completion)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", completion);
    cJSON_AddNumberToObject(u, "total_tokens", (double)prompt + completion);
    return u;
}

static cJSON *envelope(struct gen *g, const char *object)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", g->id);
    cJSON_AddStringToObject(j, "object", object);
    cJSON_AddNumberToObject(j, "created", (double)g->created);
    cJSON_AddStringToObject(j, "model", g->model);
    return j;
}

/* streamed tool-call deltas: a start carries id, type and name; pieces carry arguments */
static cJSON *tool_deltas_json(const struct gw_out_delta *d)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < d->n_tools; i++) {
        const struct gw_out_tool_ev *t = &d->tools[i];
        cJSON *tc = cJSON_CreateObject();
        cJSON_AddNumberToObject(tc, "index", t->index);
        if (t->id[0]) {
            cJSON_AddStringToObject(tc, "id", t->id);
            cJSON_AddStringToObject(tc, "type", "function");
        }
        cJSON *fn = cJSON_AddObjectToObject(tc, "function");
        if (t->name[0])
            cJSON_AddStringToObject(fn, "name", t->name);
        cJSON_AddStringToObject(fn, "arguments", t->args.data ? t->args.data : "");
        cJSON_AddItemToArray(arr, tc);
    }
    return arr;
}

/* complete tool calls for a non-streamed message */
static cJSON *tool_calls_json(const struct gw_out *o)
{
    cJSON *arr = cJSON_CreateArray();
    int n = gw_out_tool_count(o);
    for (int i = 0; i < n; i++) {
        const char *id = NULL, *name = NULL, *args = NULL;
        if (gw_out_tool_get(o, i, &id, &name, &args) < 0)
            continue;
        cJSON *tc = cJSON_CreateObject();
        cJSON_AddStringToObject(tc, "id", id);
        cJSON_AddStringToObject(tc, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(tc, "function");
        cJSON_AddStringToObject(fn, "name", name);
        cJSON_AddStringToObject(fn, "arguments", args);
        cJSON_AddItemToArray(arr, tc);
    }
    return arr;
}

/* "stop_reason": the stop string or the stop_token_ids id that matched; null for EOS, length */
static void add_stop_reason(const struct choice *ch, cJSON *choice)
{
    const struct gw_req *r = &ch->g->req;
    if (ch->stop_index >= 0 && ch->stop_index < r->n_stop) {
        cJSON_AddStringToObject(choice, "stop_reason", r->stop[ch->stop_index]);
        return;
    }
    for (int i = 0; ch->stop_token_id >= 0 && i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == ch->stop_token_id) {
            cJSON_AddNumberToObject(choice, "stop_reason", (double)ch->stop_token_id);
            return;
        }
    cJSON_AddNullToObject(choice, "stop_reason");
}

/* logprobs for entries [from, to) in the request's shape, or a JSON null when not asked */
static cJSON *lps_json(struct choice *ch, size_t from, size_t to)
{
    const struct gen *g = ch->g;
    if (!g->req.logprobs)
        return cJSON_CreateNull();
    if (g->req.kind == GW_REQ_KIND_CHAT)
        return gw_lps_chat_json(&ch->lps, g->gw->text, from, to);
    return gw_lps_completion_json(&ch->lps, g->gw->text, from, to);
}

static void send_json_event(struct gen *g, cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    struct buf b;
    buf_init(&b);
    gw_sse_event(&b, s, strlen(s));
    free(s);
    gw_exch_stream_send(g->x, b.data, b.len);
    buf_deinit(&b);
}

/* one streamed chunk of choice ch: delta fields or finish_reason */
static void send_chunk(struct choice *ch, const struct gw_out_delta *d, const char *finish,
                       bool role)
{
    struct gen *g = ch->g;
    bool chat = g->req.kind == GW_REQ_KIND_CHAT;
    cJSON *j = envelope(g, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(j, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", ch->index);
    if (chat) {
        cJSON *delta = cJSON_AddObjectToObject(c, "delta");
        if (role) {
            cJSON_AddStringToObject(delta, "role", "assistant");
            cJSON_AddStringToObject(delta, "content", "");
        }
        if (d && d->reasoning.len) {
            cJSON_AddStringToObject(delta, "reasoning_content", d->reasoning.data);
            cJSON_AddStringToObject(delta, "reasoning", d->reasoning.data);
        }
        if (d && d->content.len)
            cJSON_AddStringToObject(delta, "content", d->content.data);
        if (d && d->n_tools)
            cJSON_AddItemToObject(delta, "tool_calls", tool_deltas_json(d));
    } else {
        cJSON_AddStringToObject(c, "text", d && d->content.len ? d->content.data : "");
    }
    if (g->req.logprobs && ch->lps.sent < ch->lps.n && (d || finish)) {
        cJSON_AddItemToObject(c, "logprobs", lps_json(ch, ch->lps.sent, ch->lps.n));
        ch->lps.sent = ch->lps.n;
    } else {
        cJSON_AddNullToObject(c, "logprobs");
    }
    if (finish) {
        cJSON_AddStringToObject(c, "finish_reason", finish);
        add_stop_reason(ch, c);
    } else {
        cJSON_AddNullToObject(c, "finish_reason");
    }
    send_json_event(g, j);
}

/* first event of a streamed request: send the head and the role chunk */
static void stream_start(struct gen *g)
{
    if (!g->req.stream || g->x->started)
        return;
    gw_exch_stream_begin(g->x);
    if (g->sink)
        g->sink->begin(g->sink->ctx, g->x);
    else if (g->req.kind == GW_REQ_KIND_CHAT)
        for (int i = 0; i < g->n_ch; i++)
            send_chunk(&g->ch[i], NULL, NULL, true); /* each choice's first delta: the role */
}

/* deliver what choice ch's pipeline produced: stream it or keep it */
static void deliver(struct choice *ch)
{
    struct gw_out_delta *d = &ch->delta;
    if (gw_out_delta_is_empty(d))
        return;
    if (ch->g->sink) {
        ch->g->sink->delta(ch->g->sink->ctx, ch->g->x, d);
    } else if (ch->g->req.stream) {
        send_chunk(ch, d, NULL, false);
    } else {
        buf_append(&ch->all_reasoning, d->reasoning.data ? d->reasoning.data : "",
                      d->reasoning.len);
        buf_append(&ch->all_content, d->content.data ? d->content.data : "", d->content.len);
    }
    gw_out_delta_reset(d);
}

/* total completion tokens over the choices (usage counts the prompt once, as vLLM) */
static uint32_t completion_total(const struct gen *g)
{
    uint32_t n = 0;
    for (int i = 0; i < g->n_ch; i++)
        n += g->ch[i].completion;
    return n;
}

static void respond_full(struct gen *g)
{
    bool chat = g->req.kind == GW_REQ_KIND_CHAT;
    cJSON *j = envelope(g, chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(j, "choices");
    for (int i = 0; i < g->n_ch; i++) {
        struct choice *ch = &g->ch[i];
        cJSON *c = cJSON_CreateObject();
        cJSON_AddItemToArray(choices, c);
        cJSON_AddNumberToObject(c, "index", ch->index);
        const char *content = ch->all_content.data ? ch->all_content.data : "";
        if (chat) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            int n_tools = gw_out_tool_count(&ch->out);
            if (ch->all_content.len || n_tools == 0)
                cJSON_AddStringToObject(m, "content", content);
            else
                cJSON_AddNullToObject(m, "content");
            if (ch->all_reasoning.len) {
                cJSON_AddStringToObject(m, "reasoning_content", ch->all_reasoning.data);
                cJSON_AddStringToObject(m, "reasoning", ch->all_reasoning.data);
            } else {
                cJSON_AddNullToObject(m, "reasoning_content");
                cJSON_AddNullToObject(m, "reasoning");
            }
            if (n_tools)
                cJSON_AddItemToObject(m, "tool_calls", tool_calls_json(&ch->out));
        } else {
            cJSON_AddStringToObject(c, "text", content);
        }
        cJSON_AddItemToObject(c, "logprobs", lps_json(ch, 0, ch->lps.n));
        cJSON_AddStringToObject(c, "finish_reason", ch->finish);
        add_stop_reason(ch, c);
    }
    cJSON_AddItemToObject(j, "usage", usage_json(g->prompt_tokens, completion_total(g)));
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    gw_exch_respond(g->x, 200, "application/json", NULL, s, strlen(s));
    free(s);
}

// ---- finishing ----

static double secs(uint64_t a, uint64_t b)
{
    return a && b >= a ? (double)(b - a) / 1e9 : -1.0;
}

static void ping_closed(uv_handle_t *h)
{
    struct gen *g = h->data;
    gw_exch_unref(g->x); /* the timer's ref */
}

static void ping_stop(struct gen *g)
{
    if (!g->ping_on)
        return;
    g->ping_on = false;
    uv_timer_stop(&g->ping);
    uv_close((uv_handle_t *)&g->ping, ping_closed);
}

static void on_ping(uv_timer_t *t)
{
    struct gen *g = t->data;
    struct gw_exch *x = g->x;
    if (g->finished || x->done || !x->conn) {
        ping_stop(g);
        return;
    }
    uint64_t now = clock_now_ns();
    uint64_t last = g->t_last_ns > g->t_sent_ns ? g->t_last_ns : g->t_sent_ns;
    if (now - last + 1000000ull < (uint64_t)x->gw->cfg->sse_ping_ms * 1000000ull)
        return;
    /* quiet that long: admission is long past, so the 200 head can go now */
    stream_start(g);
    struct buf b;
    buf_init(&b);
    gw_sse_comment(&b, "ping");
    gw_exch_stream_send(x, b.data, b.len);
    buf_deinit(&b);
    g->t_sent_ns = now;
}

static void ping_start(struct gen *g)
{
    int ms = g->gw->cfg->sse_ping_ms;
    if (!g->req.stream || ms <= 0)
        return;
    g->t_sent_ns = clock_now_ns();
    uv_timer_init(&g->gw->loop, &g->ping);
    g->ping.data = g;
    gw_exch_ref(g->x);
    g->ping_on = true;
    uv_timer_start(&g->ping, on_ping, (uint64_t)ms, (uint64_t)(ms < 100 ? 100 : ms / 2));
}

/* every choice finished: the response's end */
static void gen_done(struct gen *g)
{
    g->finished = true;
    ping_stop(g);
    uint32_t completion = completion_total(g);
    LOG_INFO("request_done", "req=%s id=%llx n=%d finish=%s prompt_tokens=%u completion_tokens=%u",
             g->x->req_id, (unsigned long long)g->ch[0].req_id, g->req.n, g->ch[0].finish,
             g->prompt_tokens, completion);
    if (g->sink) {
        struct gw_openai_result r = {.req = &g->req,
                                     .finish = g->ch[0].finish,
                                     .prompt_tokens = g->prompt_tokens,
                                     .completion_tokens = completion,
                                     .out = &g->ch[0].out};
        g->sink->end(g->sink->ctx, g->x, &r);
        return;
    }
    if (!g->req.stream) {
        respond_full(g);
        return;
    }
    if (g->req.include_usage) {
        cJSON *j = envelope(g, g->req.kind == GW_REQ_KIND_CHAT ? "chat.completion.chunk"
                                                               : "text_completion");
        cJSON_AddArrayToObject(j, "choices");
        cJSON_AddItemToObject(j, "usage", usage_json(g->prompt_tokens, completion));
        send_json_event(g, j);
    }
    struct buf b;
    buf_init(&b);
    gw_sse_done(&b);
    gw_exch_stream_send(g->x, b.data, b.len);
    buf_deinit(&b);
    gw_exch_stream_end(g->x);
}

static void choice_finish(struct choice *ch, const char *finish, uint32_t completion,
                          double queue_s)
{
    struct gen *g = ch->g;
    if (ch->finished || g->finished)
        return;
    ch->finished = true;
    gw_out_flush(&ch->out, &ch->delta);
    if (gw_out_tool_count(&ch->out) > 0 && strcmp(finish, "stop") == 0)
        finish = "tool_calls";
    deliver(ch);
    ch->finish = finish;
    ch->completion = completion;
    uint64_t now = clock_now_ns();
    gw_metrics_request(g->gw->metrics, strcmp(finish, "tool_calls") == 0 ? "stop" : finish,
                       g->prompt_tokens, completion, secs(g->x->t_start_ns, g->t_first_ns),
                       secs(g->x->t_start_ns, now), queue_s);
    if (g->req.stream && !g->sink)
        send_chunk(ch, NULL, finish, false);
    if (++g->n_done == g->n_ch)
        gen_done(g);
}

/* stop the choices the scheduler still runs (a failed sibling, the client gone) */
static void abort_choices(struct gen *g, const char *why)
{
    for (int i = 0; i < g->n_ch; i++)
        if (g->ch[i].submitted) {
            gw_sched_abort(g->gw->sched, g->ch[i].req_id, why);
            g->ch[i].submitted = false;
        }
}

static void gen_fail(struct choice *ch, const struct gw_sched_ev *ev)
{
    struct gen *g = ch->g;
    if (g->finished)
        return;
    g->finished = true;
    ping_stop(g);
    abort_choices(g, "sibling_failed");
    gw_metrics_request(g->gw->metrics, "error", g->prompt_tokens, (uint32_t)ch->out.n_tokens, -1,
                       secs(g->x->t_start_ns, clock_now_ns()), -1);
    LOG_WARN("request_failed", "req=%s id=%llx choice=%d code=%d link_lost=%d msg=\"%s\"",
             g->x->req_id, (unsigned long long)ch->req_id, ch->index, ev->error_code, ev->link_lost,
             ev->message ? ev->message : "");
    struct gw_exch *x = g->x;
    const char *msg = ev->message ? ev->message : "generation failed";
    if (ev->link_lost) {
        unavailable(x, "scheduler_unavailable", "the scheduler is unavailable; retry later",
                    ev->retry_after_ms);
        return;
    }
    switch (ev->error_code) {
    case TERN__ERROR_CODE__ERROR_CODE_QUEUE_FULL:
        unavailable(x, "server_is_overloaded", msg, ev->retry_after_ms);
        break;
    case TERN__ERROR_CODE__ERROR_CODE_NO_WORKER:
        unavailable(x, "no_worker_ready", msg, ev->retry_after_ms);
        break;
    case TERN__ERROR_CODE__ERROR_CODE_DRAINING:
        unavailable(x, "shutting_down", msg, ev->retry_after_ms);
        break;
    case TERN__ERROR_CODE__ERROR_CODE_INVALID:
        gw_exch_error(x, 400, "invalid_request_error", NULL, NULL, NULL, "%s", msg);
        break;
    case TERN__ERROR_CODE__ERROR_CODE_TOO_LONG:
        gw_exch_error(x, 400, "invalid_request_error",
                      param_of(g, g->req.kind == GW_REQ_KIND_CHAT ? "messages" : "prompt"),
                      "context_length_exceeded", NULL, "%s", msg);
        break;
    case TERN__ERROR_CODE__ERROR_CODE_WORKER_LOST:
        gw_exch_error(x, 500, "server_error", NULL, "engine_dead", NULL, "%s", msg);
        break;
    default:
        gw_exch_error(x, 500, "server_error", NULL, "internal_error", NULL, "%s", msg);
        break;
    }
}

// ---- scheduler events ----

static const char *finish_name(int reason)
{
    switch (reason) {
    case TERN__FINISH_REASON__FINISH_REASON_STOP:
        return "stop";
    case TERN__FINISH_REASON__FINISH_REASON_LENGTH:
        return "length";
    case TERN__FINISH_REASON__FINISH_REASON_ABORT:
        return "abort";
    default:
        return "stop";
    }
}

static void on_sched_event(void *ctx, const struct gw_sched_ev *ev)
{
    struct choice *ch = ctx;
    struct gen *g = ch->g;
    struct gw_exch *x = g->x;
    gw_exch_ref(x); /* g lives in x's arena: keep it alive through this callback */
    switch (ev->kind) {
    case GW_SCHED_EV_TOKENS: {
        uint64_t now = clock_now_ns();
        if (ev->prompt_tokens)
            g->prompt_tokens = ev->prompt_tokens;
        if (!g->t_first_ns)
            g->t_first_ns = now;
        else if (ev->n_ids)
            gw_metrics_itl(g->gw->metrics, (double)(now - g->t_last_ns) / 1e9 / (double)ev->n_ids);
        g->t_last_ns = now;
        stream_start(g);
        if (g->req.logprobs)
            gw_lps_add(&ch->lps, ev->ids, ev->n_ids, ev->logprobs, ev->n_logprobs,
                       g->req.top_logprobs);
        bool stop = gw_out_feed(&ch->out, (const int32_t *)ev->ids, ev->n_ids, &ch->delta);
        deliver(ch);
        if (stop) {
            ch->stop_index = gw_out_stop_index(&ch->out);
            gw_sched_abort(g->gw->sched, ch->req_id, "stop_string");
            ch->submitted = false;
            choice_finish(ch, "stop", (uint32_t)ch->out.n_tokens, -1.0);
        }
        break;
    }
    case GW_SCHED_EV_FINISH:
        ch->submitted = false;
        stream_start(g);
        if (ev->prompt_tokens)
            g->prompt_tokens = ev->prompt_tokens;
        if (ev->finish_reason == TERN__FINISH_REASON__FINISH_REASON_STOP)
            ch->stop_token_id = ev->stop_token_id;
        choice_finish(ch, finish_name(ev->finish_reason),
                      ev->completion_tokens ? ev->completion_tokens : (uint32_t)ch->out.n_tokens,
                      ev->queue_ms / 1000.0);
        break;
    case GW_SCHED_EV_ERROR:
        ch->submitted = false;
        gen_fail(ch, ev);
        break;
    }
    gw_exch_unref(x);
}

/* The client went away: cancel at the scheduler at once, then end the exchange. */
static void on_client_gone(struct gw_exch *x)
{
    struct gen *g = x->ctx;
    ping_stop(g);
    bool running = false;
    for (int i = 0; i < g->n_ch; i++)
        running |= g->ch[i].submitted;
    if (running) {
        abort_choices(g, "client_gone");
        LOG_INFO("request_aborted", "req=%s id=%llx why=client_gone", x->req_id,
                 (unsigned long long)g->ch[0].req_id);
    }
    if (g->finished)
        return;
    if (g->op == GEN_OP_GENERATE && g->started) {
        g->finished = true;
        for (int i = 0; i < g->n_ch; i++)
            if (!g->ch[i].finished)
                gw_metrics_request(g->gw->metrics, "abort", g->prompt_tokens,
                                   (uint32_t)g->ch[i].out.n_tokens, -1,
                                   secs(x->t_start_ns, clock_now_ns()), -1);
    }
    /* work still in the threadpool: after_work ends the exchange */
    if (!g->work.data)
        gw_exch_stream_end(x);
}

// ---- threadpool: render + tokenize ----

static void work_run(uv_work_t *w)
{
    struct gen *g = w->data;
    const struct gw_req *r = &g->req;
    const struct gw_text *t = g->gw->text;
    char *prompt = NULL;
    size_t n = 0;
    if (r->kind == GW_REQ_KIND_CHAT) {
        g->work_rc = gw_text_render(t, r, &prompt, &n, g->work_err, sizeof(g->work_err));
        if (g->work_rc < 0)
            return;
        g->work_rc = gw_text_encode(t, prompt, n, &g->ids, &g->n_ids);
        size_t k = n;
        while (k > 0 && (prompt[k - 1] == '\n' || prompt[k - 1] == ' '))
            k--;
        g->prompt_thinking = k >= 7 && memcmp(prompt + k - 7, "<think>", 7) == 0;
        free(prompt);
    } else if (r->prompt) {
        g->work_rc = gw_text_encode(t, r->prompt, strlen(r->prompt), &g->ids, &g->n_ids);
    } else {
        g->ids = xmalloc(r->n_prompt_ids * sizeof(int32_t) + 1);
        memcpy(g->ids, r->prompt_ids, r->n_prompt_ids * sizeof(int32_t));
        g->n_ids = r->n_prompt_ids;
        g->work_rc = 0;
    }
    if (g->work_rc < 0 && !g->work_err[0])
        snprintf(g->work_err, sizeof(g->work_err), "tokenization failed: %s", err_str(g->work_rc));
}

static void start_generation(struct gen *g)
{
    struct gw *gw = g->gw;
    struct gw_exch *x = g->x;
    struct gw_req_err e;
    int64_t mml = gw_openai_max_model_len(gw);
    if (gw_req_check_context(&g->req, (int64_t)g->n_ids, mml, &e) < 0) {
        req_error(x, &e);
        return;
    }
    size_t vocab = gw_text_vocab_size(gw->text);
    for (size_t i = 0; i < g->n_ids; i++)
        if (g->ids[i] < 0 || (size_t)g->ids[i] >= vocab) {
            gw_exch_error(x, 400, "invalid_request_error", "prompt", NULL, NULL,
                          "token id %d is outside the vocabulary", g->ids[i]);
            return;
        }
    if (gw_req_check_vocab(&g->req, vocab, &e) < 0) {
        req_error(x, &e);
        return;
    }
    /* stop ids: the model's EOS (unless ignore_eos), then stop_token_ids */
    int32_t eos[2];
    gw_text_eos_ids(gw->text, &eos[0], &eos[1]);
    uint32_t *stop_ids =
        gw_arena_alloc(x->arena, sizeof(uint32_t) * (2 + (size_t)g->req.n_stop_ids));
    size_t n_stop_ids = 0;
    for (int i = 0; i < 2 && !g->req.ignore_eos; i++)
        if (eos[i] >= 0)
            stop_ids[n_stop_ids++] = (uint32_t)eos[i];
    for (int i = 0; i < g->req.n_stop_ids; i++)
        stop_ids[n_stop_ids++] = (uint32_t)g->req.stop_ids[i];
    /* tool_choice "none": as vLLM (without --exclude-tools-when-tool-choice-none), the tools
     * are still rendered into the prompt (gw_text_render passes the whole body), but the output
     * is not parsed for tool calls: <tool_call> text stays in content */
    bool chat = g->req.kind == GW_REQ_KIND_CHAT;
    if (chat && g->req.tools && g->req.tool_choice != GW_TOOL_CHOICE_NONE) {
        char *tj = cJSON_PrintUnformatted(g->req.tools);
        g->tools_json = gw_arena_strdup(x->arena, tj);
        free(tj);
    }
    for (int i = 0; i < g->n_ch; i++) {
        struct choice *ch = &g->ch[i];
        ch->req_id = gw_sched_next_id(gw->sched);
        gw_out_delta_init(&ch->delta);
        int rc = gw_out_init(&ch->out, gw->text, g->req.stop, g->req.n_stop, chat,
                             g->prompt_thinking, g->tools_json, ch->req_id);
        if (rc < 0) {
            gw_out_delta_deinit(&ch->delta);
            gw_exch_error(x, 500, "server_error", NULL, NULL, NULL,
                          "cannot set up the output parser");
            return;
        }
        ch->out_init = true;
        ch->out.tools_max = g->req.parallel_tool_calls ? 0 : 1;
        ch->out.stop_after = (int)g->req.min_tokens;
    }
    struct gw_sched_submit sub = {0};
    sub.prompt_ids = g->ids;
    sub.n_prompt_ids = g->n_ids;
    sub.max_tokens = (uint32_t)g->req.max_tokens;
    sub.temperature = (float)g->req.temperature;
    sub.top_p = (float)g->req.top_p;
    sub.top_k = (uint32_t)g->req.top_k;
    sub.min_p = (float)g->req.min_p;
    sub.presence_penalty = (float)g->req.presence_penalty;
    sub.frequency_penalty = (float)g->req.frequency_penalty;
    sub.repetition_penalty = (float)g->req.repetition_penalty;
    sub.has_seed = g->req.has_seed;
    sub.stop_ids = n_stop_ids ? stop_ids : NULL;
    sub.n_stop_ids = n_stop_ids;
    sub.ignore_eos = g->req.ignore_eos;
    sub.logprobs = g->req.logprobs;
    sub.top_logprobs = (uint32_t)g->req.top_logprobs;
    sub.min_tokens = (uint32_t)g->req.min_tokens;
    sub.bias_ids = (const uint32_t *)g->req.bias_ids;
    sub.bias_vals = g->req.bias_vals;
    sub.n_bias = (size_t)g->req.n_bias;
    sub.json_schema = g->req.json_schema;
    sub.model = NULL;
    /* n choices = n independent sequences (the prompt is prefilled for each; no KV sharing).
     * A seed gives choice i seed + i, as vLLM's parallel sampling; without one each sequence
     * gets its own from its req_id at the scheduler. */
    for (int i = 0; i < g->n_ch; i++) {
        struct choice *ch = &g->ch[i];
        sub.req_id = ch->req_id;
        sub.seed = g->req.seed + (uint64_t)i;
        int rc = gw_sched_submit(gw->sched, &sub, on_sched_event, ch);
        if (rc < 0) {
            abort_choices(g, "submit_failed");
            if (rc == ERR_CLOSED)
                unavailable(x, "scheduler_unavailable", "the scheduler is unavailable; retry later",
                            0);
            else
                unavailable(x, "server_is_overloaded", "the server is overloaded; retry later", 0);
            return;
        }
        ch->submitted = true;
    }
    g->started = true;
    g->prompt_tokens = (uint32_t)g->n_ids;
    LOG_INFO("request_submitted",
             "req=%s id=%llx n=%d prompt_tokens=%zu max_tokens=%lld stream=%d temperature=%g "
             "top_p=%g top_k=%lld min_p=%g repetition_penalty=%g min_tokens=%lld logit_bias=%d "
             "stop_token_ids=%d",
             x->req_id, (unsigned long long)g->ch[0].req_id, g->req.n, g->n_ids,
             (long long)g->req.max_tokens, g->req.stream, g->req.temperature, g->req.top_p,
             (long long)g->req.top_k, g->req.min_p, g->req.repetition_penalty,
             (long long)g->req.min_tokens, g->req.n_bias, g->req.n_stop_ids);
    /* the stream head waits for the first event, so that admission errors (queue full, no
     * worker) still get their HTTP status and Retry-After; a long prefill gets ": ping"
     * comments (and with the first one the head) every sse_ping_ms */
    ping_start(g);
}

static void respond_tokens(struct gen *g)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "count", (double)g->n_ids);
    cJSON_AddNumberToObject(j, "max_model_len", (double)gw_openai_max_model_len(g->gw));
    cJSON *arr = cJSON_AddArrayToObject(j, "tokens");
    for (size_t i = 0; i < g->n_ids; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(g->ids[i]));
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    gw_exch_respond(g->x, 200, "application/json", NULL, s, strlen(s));
    free(s);
}

static void work_done(uv_work_t *w, int status)
{
    struct gen *g = w->data;
    struct gw_exch *x = g->x;
    w->data = NULL;
    g->work.data = NULL;
    if (!x->conn || status == UV_ECANCELED) {
        /* client gone while we rendered: nothing was submitted */
        gw_exch_stream_end(x);
    } else if (g->work_rc < 0) {
        gw_exch_error(x, 400, "invalid_request_error",
                      param_of(g, g->req.kind == GW_REQ_KIND_CHAT ? "messages" : "prompt"), NULL,
                      NULL, "%s", g->work_err);
    } else if (g->op == GEN_OP_TOKENIZE) {
        respond_tokens(g);
    } else if (x->gw->draining) {
        unavailable(x, "shutting_down", "the server is shutting down", 0);
    } else {
        start_generation(g);
    }
    gw_exch_unref(x); /* the work's ref */
}

/* the request's n choices, in the arena (after the parse: req.n is known) */
static void choices_init(struct gen *g, struct gw_exch *x)
{
    g->ch = gw_arena_alloc(x->arena, sizeof(*g->ch) * (size_t)g->req.n);
    for (int i = 0; i < g->req.n; i++) {
        struct choice *ch = &g->ch[i];
        ch->g = g;
        ch->index = i;
        ch->stop_index = -1;
        ch->stop_token_id = -1;
        buf_init(&ch->all_reasoning);
        buf_init(&ch->all_content);
    }
    g->n_ch = g->req.n;
}

static struct gen *gen_new(struct gw *gw, struct gw_exch *x, enum gen_op op)
{
    struct gen *g = gw_arena_alloc(x->arena, sizeof(*g));
    g->gw = gw;
    g->x = x;
    g->op = op;
    gw_arena_cleanup_add(x->arena, gen_cleanup, g);
    x->ctx = g;
    x->on_abort = on_client_gone;
    return g;
}

static void queue_work(struct gen *g)
{
    g->work.data = g;
    gw_exch_ref(g->x);
    int rc = uv_queue_work(&g->gw->loop, &g->work, work_run, work_done);
    if (rc < 0) {
        g->work.data = NULL;
        gw_exch_unref(g->x);
        gw_exch_error(g->x, 500, "server_error", NULL, NULL, NULL, "cannot queue work: %s",
                      uv_strerror(rc));
    }
}

static void generate(struct gw *gw, struct gw_exch *x, enum gw_req_kind kind, const char *body,
                     size_t len, const struct gw_openai_sink *sink)
{
    struct gw_sched_status st;
    if (gw->draining) {
        unavailable(x, "shutting_down", "the server is shutting down", 0);
        return;
    }
    struct gen *g = gen_new(gw, x, GEN_OP_GENERATE);
    g->sink = sink;
    struct gw_req_err e;
    if (gw_req_parse(&g->req, kind, body, len, gw_openai_model(gw), x->arena, &e) < 0) {
        req_error(x, &e);
        return;
    }
    char unknown[256]; /* ignored, as vLLM does, and named once (docs/API.md "Field list") */
    uint32_t sup;
    if (gw_req_unknown_fields(&g->req, unknown, sizeof(unknown)) > 0 &&
        log_limit_ok(&gw->unknown_fields_warn[kind == GW_REQ_KIND_CHAT ? 0 : 1], clock_now_ms(),
                     GW_WARN_INTERVAL_MS, &sup))
        LOG_WARN("request_fields_ignored", "req=%s endpoint=%s fields=%s suppressed=%u",
                 x->req_id, kind == GW_REQ_KIND_CHAT ? "chat" : "completions", unknown, sup);
    gw_req_apply_defaults(&g->req, gw->gen_defaults);
    choices_init(g, x);
    gw_sched_status_get(gw->sched, &st);
    if (!st.up) {
        unavailable(x, "scheduler_unavailable", "the scheduler is unavailable; retry later", 0);
        return;
    }
    g->model = gw_openai_model(gw);
    g->created = (long long)time(NULL);
    snprintf(g->id, sizeof(g->id), "%s-%s", kind == GW_REQ_KIND_CHAT ? "chatcmpl" : "cmpl",
             x->req_id);
    queue_work(g);
}

void gw_openai_generate(struct gw *gw, struct gw_exch *x, enum gw_req_kind kind)
{
    generate(gw, x, kind, x->body, x->body_len, NULL);
}

void gw_openai_generate_sink(struct gw *gw, struct gw_exch *x, const char *body, size_t len,
                             const struct gw_openai_sink *sink)
{
    generate(gw, x, GW_REQ_KIND_CHAT, body, len, sink);
}

void gw_openai_tokenize(struct gw *gw, struct gw_exch *x)
{
    struct gen *g = gen_new(gw, x, GEN_OP_TOKENIZE);
    struct gw_req_err e;
    cJSON *probe = cJSON_ParseWithLength(x->body, x->body_len);
    bool chat = probe && cJSON_GetObjectItemCaseSensitive(probe, "messages") != NULL;
    cJSON_Delete(probe);
    if (gw_req_parse(&g->req, chat ? GW_REQ_KIND_CHAT : GW_REQ_KIND_COMPLETION, x->body,
                     x->body_len, gw_openai_model(gw), x->arena, &e) < 0) {
        req_error(x, &e);
        return;
    }
    queue_work(g);
}

void gw_openai_detokenize(struct gw *gw, struct gw_exch *x)
{
    cJSON *j = cJSON_ParseWithLength(x->body, x->body_len);
    cJSON *toks = j ? cJSON_GetObjectItemCaseSensitive(j, "tokens") : NULL;
    if (!toks || !cJSON_IsArray(toks)) {
        cJSON_Delete(j);
        gw_exch_error(x, 400, "invalid_request_error", "tokens", NULL, NULL,
                      "'tokens' must be a list of token ids");
        return;
    }
    size_t n = (size_t)cJSON_GetArraySize(toks);
    int32_t *ids = xmalloc((n + 1) * sizeof(int32_t));
    size_t k = 0;
    size_t vocab = gw_text_vocab_size(gw->text);
    cJSON *t;
    cJSON_ArrayForEach(t, toks)
    {
        if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble >= (double)vocab ||
            t->valuedouble != (double)(int32_t)t->valuedouble) {
            free(ids);
            cJSON_Delete(j);
            gw_exch_error(x, 400, "invalid_request_error", "tokens", NULL, NULL,
                          "token ids must be integers in [0, %zu)", vocab);
            return;
        }
        ids[k++] = (int32_t)t->valuedouble;
    }
    cJSON_Delete(j);
    char *text = NULL;
    size_t len = 0;
    int rc = gw_text_decode(gw->text, ids, k, false, &text, &len);
    free(ids);
    if (rc < 0) {
        gw_exch_error(x, 400, "invalid_request_error", "tokens", NULL, NULL, "cannot decode: %s",
                      err_str(rc));
        return;
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "prompt", text);
    free(text);
    char *s = cJSON_PrintUnformatted(out);
    cJSON_Delete(out);
    gw_exch_respond(x, 200, "application/json", NULL, s, strlen(s));
    free(s);
}
