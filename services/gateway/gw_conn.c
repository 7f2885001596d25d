/* gw_conn: libuv TCP connection + llhttp request parser. All input goes into c->in and is fed
 * to llhttp from there; the parser pauses after each complete message, so a pipelined request
 * waits until the current exchange is done. Limits (B.2): URL 414, header field/total/count
 * 431, body 413 (from Content-Length before reading it), header deadline and body idle 408.
 * Framing errors (CL+TE, duplicate CL, bad chunking) answer 400 and close. */
#include "gw_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <llhttp.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "gw.h"
#include "gw_arena.h"
#include "common/buf.h"
#include "gw_http.h"
#include "gw_route.h"

enum conn_phase {
    CONN_PHASE_IDLE,    /* between requests (keep-alive) */
    CONN_PHASE_HEADERS, /* first byte of a request seen */
    CONN_PHASE_BODY,    /* reading the body */
    CONN_PHASE_BUSY,    /* exchange dispatched, parser paused */
    CONN_PHASE_LINGER,  /* response sent with close: discard input, then close */
};

struct gw_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    struct gw *gw;
    struct gw_conn *prev, *next;
    uint64_t id;
    llhttp_t parser;
    llhttp_settings_t settings;
    enum conn_phase phase;
    int handles_open; /* handles not yet closed */
    bool closing;
    bool close_after_write; /* close once the queued writes are flushed */
    bool reading;
    bool driving;      /* inside conn_drive (no reentry) */
    bool msg_complete; /* the parser paused after a full message */
    bool write_failed; /* a write failed: close from the timer, not from the caller */
    int pending_writes;
    int err_status;        /* limit hit inside a callback: answer this */
    const char *err_msg;   /* its message, or NULL for the status's default */
    struct buf in;      /* unparsed input */
    size_t in_off;         /* consumed prefix of in */
    uint64_t stream_off;   /* bytes of the stream consumed by llhttp before exec_base */
    const char *exec_base; /* start of the span being fed to llhttp_execute */
    uint64_t method_end;   /* stream offset just past the method */
    uint64_t url_end;      /* ... past the request-target */
    uint64_t value_end;    /* ... past the last header value byte */
    bool version_seen;     /* the version span has started */
    /* request being parsed */
    struct gw_exch *x; /* current exchange (parsing or busy) */
    struct buf url;
    struct buf field;
    struct buf value;
    bool in_value;
    size_t headers_bytes;
    struct buf body;
};

#define GW_CONN_WRITE_QUEUE_MAX (16u << 20) /* bytes queued to one client before we drop it */

struct write_req {
    uv_write_t req;
    struct gw_conn *conn;
    char data[];
};

static void conn_drive(struct gw_conn *c);
static void conn_fail(struct gw_conn *c, int status, const char *msg);
static void timer_arm(struct gw_conn *c, int ms);
static void on_timer(uv_timer_t *t);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

// ---- close and free ----

static void on_handle_closed(uv_handle_t *h)
{
    struct gw_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    struct gw *gw = c->gw;
    if (c->prev)
        c->prev->next = c->next;
    else
        gw->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    gw->n_conns--;
    buf_deinit(&c->in);
    buf_deinit(&c->url);
    buf_deinit(&c->field);
    buf_deinit(&c->value);
    buf_deinit(&c->body);
    LOG_DEBUG("conn_closed", "conn=%llu", (unsigned long long)c->id);
    free(c);
    gw_check_drained(gw);
}

void gw_conn_close(struct gw_conn *c)
{
    if (!c || c->closing)
        return;
    c->closing = true;
    struct gw_exch *x = c->x;
    c->x = NULL;
    if (x) {
        x->conn = NULL;
        if (!x->done && x->on_abort) {
            gw_exch_abort_cb cb = x->on_abort;
            x->on_abort = NULL;
            cb(x);
        }
        gw_exch_unref(x);
    }
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

// ---- writes ----

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct gw_conn *c = req->data;
    if (status < 0 && !c->closing)
        gw_conn_close(c);
    /* else: linger until EOF or the timer */
}

static void maybe_finish_close(struct gw_conn *c)
{
    if (c->closing || !c->close_after_write || c->pending_writes > 0)
        return;
    /* half-close, then linger briefly reading and discarding, so the client sees the
     * response instead of a reset caused by unread input */
    c->phase = CONN_PHASE_LINGER;
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        gw_conn_close(c);
        return;
    }
    timer_arm(c, 1000);
    if (!c->reading)
        c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
}

static void on_write(uv_write_t *req, int status)
{
    struct write_req *w = (struct write_req *)req;
    struct gw_conn *c = w->conn;
    free(w);
    c->pending_writes--;
    if (status < 0 && !c->closing) {
        LOG_DEBUG("conn_write_failed", "conn=%llu err=%s", (unsigned long long)c->id,
                  uv_strerror(status));
        gw_conn_close(c);
        return;
    }
    maybe_finish_close(c);
}

void gw_conn_write(struct gw_conn *c, const char *data, size_t n)
{
    if (!c || c->closing || c->write_failed || n == 0)
        return;
    struct write_req *w = xmalloc(sizeof(*w) + n);
    w->conn = c;
    memcpy(w->data, data, n);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        /* never close under the caller (it may be the exchange's own handler): defer */
        free(w);
        c->write_failed = true;
        uv_timer_start(&c->timer, on_timer, 0, 0);
        return;
    }
    c->pending_writes++;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > GW_CONN_WRITE_QUEUE_MAX) {
        /* the client does not read: drop it rather than buffer without bound */
        LOG_WARN("conn_slow_reader", "conn=%llu queued=%zu", (unsigned long long)c->id,
                 uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp));
        c->write_failed = true;
        uv_timer_start(&c->timer, on_timer, 0, 0);
    }
}

// ---- timers ----

static void on_timer(uv_timer_t *t)
{
    struct gw_conn *c = t->data;
    if (c->write_failed) {
        gw_conn_close(c);
        return;
    }
    switch (c->phase) {
    case CONN_PHASE_IDLE:
        if (c->in.len > c->in_off) /* bytes but no full request line yet */
            conn_fail(c, 408, "request header timeout");
        else
            gw_conn_close(c);
        break;
    case CONN_PHASE_HEADERS:
        conn_fail(c, 408, "request header timeout");
        break;
    case CONN_PHASE_BODY:
        conn_fail(c, 408, "request body timeout");
        break;
    case CONN_PHASE_LINGER:
        gw_conn_close(c);
        break;
    case CONN_PHASE_BUSY:
        break;
    }
}

static void timer_arm(struct gw_conn *c, int ms)
{
    if (c->write_failed)
        return;
    uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
}

// ---- llhttp callbacks ----

static int on_message_begin(llhttp_t *p)
{
    struct gw_conn *c = p->data;
    struct gw *gw = c->gw;
    if (c->phase == CONN_PHASE_IDLE)
        timer_arm(c, gw->cfg->header_timeout_ms);
    c->phase = CONN_PHASE_HEADERS;
    struct gw_exch *x;
    struct gw_arena *a = gw_arena_create(8192);
    x = gw_arena_alloc(a, sizeof(*x));
    x->gw = gw;
    x->arena = a;
    x->refs = 1;
    x->conn = c;
    c->x = x;
    buf_reset(&c->url);
    buf_reset(&c->field);
    buf_reset(&c->value);
    buf_reset(&c->body);
    c->in_value = false;
    c->headers_bytes = 0;
    c->version_seen = false;
    return 0;
}

/* stream offset of a span pointer handed to a callback */
static uint64_t span_off(const struct gw_conn *c, const char *at)
{
    return c->stream_off + (uint64_t)(at - c->exec_base);
}

static int reject(struct gw_conn *c, int status, const char *msg)
{
    c->err_status = status;
    c->err_msg = msg;
    return HPE_USER;
}

static int on_method(llhttp_t *p, const char *at, size_t n)
{
    struct gw_conn *c = p->data;
    c->method_end = span_off(c, at) + n;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct gw_conn *c = p->data;
    /* RFC 9112 3: method SP request-target; llhttp skips extra spaces */
    if (c->url.len == 0 && span_off(c, at) != c->method_end + 1)
        return reject(c, 400, "malformed request line");
    if (c->url.len + n > (size_t)c->gw->cfg->url_max) {
        c->err_status = 414;
        return HPE_USER;
    }
    buf_append(&c->url, at, n);
    c->url_end = span_off(c, at) + n;
    return 0;
}

static int on_version(llhttp_t *p, const char *at, size_t n)
{
    struct gw_conn *c = p->data;
    (void)n;
    /* request-target SP "HTTP/" version; llhttp skips extra spaces here too */
    if (!c->version_seen && span_off(c, at) != c->url_end + 6)
        return reject(c, 400, "malformed request line");
    c->version_seen = true;
    return 0;
}

static int header_flush(struct gw_conn *c)
{
    struct gw_exch *x = c->x;
    if (!c->in_value)
        return 0;
    if (x->n_headers >= c->gw->cfg->headers_max || x->n_headers >= GW_HEADERS_MAX) {
        c->err_status = 431;
        return HPE_USER;
    }
    struct gw_header *h = &x->headers[x->n_headers++];
    h->name = gw_arena_strndup(x->arena, c->field.data ? c->field.data : "", c->field.len);
    /* trim trailing whitespace of the value (llhttp keeps it) */
    size_t vl = c->value.len;
    while (vl > 0 && (c->value.data[vl - 1] == ' ' || c->value.data[vl - 1] == '\t'))
        vl--;
    h->value = gw_arena_strndup(x->arena, c->value.data ? c->value.data : "", vl);
    buf_reset(&c->field);
    buf_reset(&c->value);
    c->in_value = false;
    return 0;
}

static int header_account(struct gw_conn *c, size_t n)
{
    const struct gw_cfg *cfg = c->gw->cfg;
    c->headers_bytes += n;
    if (c->field.len + c->value.len + n > (size_t)cfg->header_field_max ||
        c->headers_bytes > (size_t)cfg->headers_total_max) {
        c->err_status = 431;
        return HPE_USER;
    }
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct gw_conn *c = p->data;
    int rc = header_flush(c);
    if (rc)
        return rc;
    if ((rc = header_account(c, n)))
        return rc;
    buf_append(&c->field, at, n);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct gw_conn *c = p->data;
    int rc = header_account(c, n);
    if (rc)
        return rc;
    if (!c->in_value && c->field.len == 0)
        return reject(c, 400, "empty header field name");
    /* llhttp passes an obs-fold continuation (CRLF SP/HTAB) as a second piece of the value,
     * after a gap; a value merely split across reads has none. RFC 9112 5.2: reject it. */
    if (c->in_value && span_off(c, at) != c->value_end)
        return reject(c, 400, "obsolete line folding in a header field");
    c->value_end = span_off(c, at) + n;
    c->in_value = true;
    buf_append(&c->value, at, n);
    return 0;
}

static void set_request_id(struct gw_exch *x)
{
    const char *in = gw_exch_header(x, "x-request-id");
    size_t n = 0;
    if (in) {
        for (; in[n] && n < sizeof(x->req_id) - 1; n++) {
            char ch = in[n];
            bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == ':';
            if (!ok)
                break;
        }
        if (in[n] != '\0')
            n = 0; /* unsafe or too long: make our own */
    }
    if (n > 0) {
        memcpy(x->req_id, in, n);
        x->req_id[n] = '\0';
    } else {
        snprintf(x->req_id, sizeof(x->req_id), "%08x%08llx", (unsigned)x->gw->port_bound ^ 0x5eedu,
                 (unsigned long long)++x->gw->next_req_id);
    }
}

/* Content-Type of a POST body (ECOSYSTEM.md A.7). Like vLLM, a media type that cannot be JSON
 * is 415; unlike vLLM (which wants exactly application/json), a missing type, curl's default
 * application/x-www-form-urlencoded (`curl -d`) and text/plain (fetch() with a string body)
 * are taken as JSON, as llama.cpp does. Parameters (charset) are ignored. */
static bool content_type_ok(const char *ct)
{
    if (!ct)
        return true;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    if (n == 0)
        return true;
    static const char *const ok[] = {"application/json", "application/x-www-form-urlencoded",
                                     "text/plain"};
    for (size_t i = 0; i < ARRAY_LEN(ok); i++)
        if (n == strlen(ok[i]) && strncasecmp(ct, ok[i], n) == 0)
            return true;
    /* application/<anything>+json */
    return n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
           strncasecmp(ct + n - 5, "+json", 5) == 0;
}

/* Checks llhttp leaves to us (RFC 9112 2.3, 3.2): version 1.0/1.1 only; exactly one Host in
 * HTTP/1.1 and at most one in 1.0; a POST body must be JSON. */
static int headers_check(struct gw_conn *c, const llhttp_t *p)
{
    const struct gw_exch *x = c->x;
    if (p->http_major != 1 || p->http_minor > 1)
        return reject(c, 400, "unsupported HTTP version");
    int hosts = 0;
    for (int i = 0; i < x->n_headers; i++)
        if (strcasecmp(x->headers[i].name, "host") == 0)
            hosts++;
    if (hosts > 1)
        return reject(c, 400, "more than one Host header");
    if (hosts == 0 && p->http_minor == 1)
        return reject(c, 400, "missing Host header");
    if (p->method == HTTP_POST && !content_type_ok(gw_exch_header(x, "content-type")))
        return reject(c, 415, "Unsupported Media Type: only 'application/json' is allowed");
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct gw_conn *c = p->data;
    int rc = header_flush(c);
    if (rc)
        return rc;
    if ((rc = headers_check(c, p)))
        return rc;
    struct gw_exch *x = c->x;
    x->method = p->method;
    x->method_name = llhttp_method_name((llhttp_method_t)p->method);
    char *url = gw_arena_strndup(x->arena, c->url.data ? c->url.data : "", c->url.len);
    char *q = strchr(url, '?');
    if (q) {
        *q = '\0';
        x->query = q + 1;
    }
    x->path = url;
    set_request_id(x);
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > (uint64_t)c->gw->cfg->body_max) {
        c->err_status = 413;
        return HPE_USER;
    }
    c->phase = CONN_PHASE_BODY;
    timer_arm(c, c->gw->cfg->body_idle_ms);
    const char *expect = gw_exch_header(x, "expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && p->content_length > 0)
        gw_conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct gw_conn *c = p->data;
    if (c->body.len + n > (size_t)c->gw->cfg->body_max) {
        c->err_status = 413;
        return HPE_USER;
    }
    buf_append(&c->body, at, n);
    return 0;
}

/* p->content_length is the size of the chunk that follows: refuse it before reading it */
static int on_chunk_header(llhttp_t *p)
{
    struct gw_conn *c = p->data;
    if (p->content_length > (uint64_t)c->gw->cfg->body_max - c->body.len) {
        c->err_status = 413;
        return HPE_USER;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct gw_conn *c = p->data;
    struct gw_exch *x = c->x;
    x->keep_alive = llhttp_should_keep_alive(p) != 0;
    x->body = gw_arena_strndup(x->arena, c->body.data ? c->body.data : "", c->body.len);
    x->body_len = c->body.len;
    c->msg_complete = true;
    return HPE_PAUSED;
}

// ---- errors before dispatch ----

/* A framing or limit error: answer status with an OpenAI-shaped body and close. */
static void conn_fail(struct gw_conn *c, int status, const char *msg)
{
    if (c->closing)
        return;
    uv_timer_stop(&c->timer);
    struct buf b;
    buf_init(&b);
    char body[512];
    int bn = snprintf(body, sizeof(body),
                      "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\","
                      "\"param\":null,\"code\":null}}",
                      msg);
    buf_printf(&b,
                  "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                  "Connection: close\r\n\r\n%s",
                  status, gw_http_reason(status), bn, body);
    gw_conn_write(c, b.data, b.len);
    buf_deinit(&b);
    LOG_INFO("http_reject", "conn=%llu status=%d msg=\"%s\"", (unsigned long long)c->id, status,
             msg);
    if (c->x) {
        struct gw_exch *x = c->x;
        c->x = NULL;
        x->conn = NULL;
        gw_exch_unref(x);
    }
    c->close_after_write = true;
    c->phase = CONN_PHASE_BUSY; /* nothing more is parsed */
    if (c->pending_writes == 0)
        gw_conn_close(c);
}

static void parse_error(struct gw_conn *c, llhttp_errno_t e)
{
    if (c->err_status) { /* set by our callback (HPE_USER or HPE_CB_*) */
        const char *msg = c->err_msg             ? c->err_msg
                          : c->err_status == 414 ? "request URI too long"
                          : c->err_status == 431 ? "request header fields too large"
                          : c->err_status == 413 ? "request body too large"
                                                 : "bad request";
        conn_fail(c, c->err_status, msg);
        return;
    }
    char msg[160];
    const char *reason = llhttp_get_error_reason(&c->parser);
    snprintf(msg, sizeof(msg), "bad request: %s", reason ? reason : llhttp_errno_name(e));
    /* keep the message JSON-safe */
    for (char *s = msg; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
            *s = ' ';
    conn_fail(c, 400, msg);
}

// ---- driving the parser ----

static void dispatch(struct gw_conn *c)
{
    struct gw_exch *x = c->x;
    c->phase = CONN_PHASE_BUSY;
    uv_timer_stop(&c->timer);
    x->t_start_ns = clock_now_ns();
    c->gw->n_inflight++;
    gw_exch_ref(x); /* the route's ref, dropped when the response is done */
    gw_route_dispatch(c->gw, x);
}

static void conn_drive(struct gw_conn *c)
{
    if (c->driving)
        return;
    c->driving = true;
    while (!c->closing && c->phase != CONN_PHASE_BUSY && c->phase != CONN_PHASE_LINGER &&
           c->in.len > c->in_off) {
        const char *p = c->in.data + c->in_off;
        size_t n = c->in.len - c->in_off;
        c->msg_complete = false;
        c->exec_base = p;
        llhttp_errno_t e = llhttp_execute(&c->parser, p, n);
        if (e == HPE_OK) {
            c->in_off += n;
            c->stream_off += n;
            break;
        }
        if (e == HPE_PAUSED && c->msg_complete) {
            const char *pos = llhttp_get_error_pos(&c->parser);
            c->in_off += (size_t)(pos - p);
            c->stream_off += (uint64_t)(pos - p);
            llhttp_resume(&c->parser);
            dispatch(c);
            continue;
        }
        parse_error(c, e);
        break;
    }
    if (c->in_off == c->in.len) {
        buf_reset(&c->in);
        c->in_off = 0;
    }
    if (!c->closing) {
        bool want = c->phase != CONN_PHASE_BUSY;
        if (want && !c->reading) {
            c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
        }
    }
    c->driving = false;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct gw_conn *c = h->data;
    (void)suggested;
    size_t want = 65536;
    if (c->in.cap - c->in.len < want + 1) {
        /* compact, then grow */
        if (c->in_off > 0) {
            memmove(c->in.data, c->in.data + c->in_off, c->in.len - c->in_off);
            c->in.len -= c->in_off;
            c->in_off = 0;
        }
        if (c->in.cap - c->in.len < want + 1) {
            c->in.data = xrealloc(c->in.data, c->in.len + want + 1);
            c->in.cap = c->in.len + want + 1;
        }
    }
    *buf = uv_buf_init(c->in.data + c->in.len, (unsigned)want);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct gw_conn *c = s->data;
    (void)buf;
    if (nread < 0) {
        /* EOF or reset: the client is gone, also mid-request (a half-closing HTTP client is
         * rare; a disconnect must reach the scheduler as an Abort at once) */
        gw_conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    if (c->phase == CONN_PHASE_LINGER)
        return; /* discard */
    c->in.len += (size_t)nread;
    c->in.data[c->in.len] = '\0';
    if (c->phase == CONN_PHASE_BUSY) {
        /* pipelined bytes while an exchange runs: keep them, but do not buffer without bound */
        if (c->in.len - c->in_off >
            (size_t)(c->gw->cfg->body_max + c->gw->cfg->headers_total_max)) {
            uv_read_stop(s);
            c->reading = false;
        }
        return;
    }
    if (c->phase == CONN_PHASE_BODY)
        timer_arm(c, c->gw->cfg->body_idle_ms);
    conn_drive(c);
}

// ---- accept ----

void gw_conn_accept(struct gw *gw)
{
    struct gw_conn *c = xcalloc(1, sizeof(*c));
    c->gw = gw;
    c->id = ++gw->next_conn_id;
    uv_tcp_init(&gw->loop, &c->tcp);
    uv_timer_init(&gw->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles_open = 2;
    c->prev = NULL;
    c->next = gw->conns;
    if (gw->conns)
        gw->conns->prev = c;
    gw->conns = c;
    gw->n_conns++;
    buf_init(&c->in);
    buf_init(&c->url);
    buf_init(&c->field);
    buf_init(&c->value);
    buf_init(&c->body);
    int rc = uv_accept((uv_stream_t *)&gw->listener, (uv_stream_t *)&c->tcp);
    if (rc < 0) {
        LOG_WARN("accept_failed", "err=%s", uv_strerror(rc));
        gw_conn_close(c);
        return;
    }
    if (gw->n_conns > gw->cfg->max_conns || gw->draining) {
        LOG_WARN("conn_rejected", "n_conns=%d max=%d draining=%d", gw->n_conns, gw->cfg->max_conns,
                 gw->draining);
        gw_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    llhttp_settings_init(&c->settings);
    c->settings.on_message_begin = on_message_begin;
    c->settings.on_method = on_method;
    c->settings.on_url = on_url;
    c->settings.on_version = on_version;
    c->settings.on_header_field = on_header_field;
    c->settings.on_header_value = on_header_value;
    c->settings.on_headers_complete = on_headers_complete;
    c->settings.on_body = on_body;
    c->settings.on_chunk_header = on_chunk_header;
    c->settings.on_message_complete = on_message_complete;
    llhttp_init(&c->parser, HTTP_REQUEST, &c->settings);
    c->parser.data = c;
    c->phase = CONN_PHASE_IDLE;
    timer_arm(c, gw->cfg->header_timeout_ms);
    c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
    if (!c->reading)
        gw_conn_close(c);
}

// ---- exchange done ----

void gw_conn_exch_done(struct gw_conn *c, struct gw_exch *x)
{
    if (!c || c->x != x || c->closing)
        return;
    c->x = NULL;
    bool keep = x->keep_alive && !c->gw->draining;
    gw_exch_unref(x);
    if (!keep) {
        c->close_after_write = true;
        maybe_finish_close(c);
        return;
    }
    c->phase = CONN_PHASE_IDLE;
    timer_arm(c, c->gw->cfg->keepalive_ms);
    if (!c->reading) {
        c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
        if (!c->reading) {
            gw_conn_close(c);
            return;
        }
    }
    conn_drive(c);
}

void gw_conn_close_idle(struct gw *gw)
{
    struct gw_conn *c = gw->conns;
    while (c) {
        struct gw_conn *next = c->next;
        if (c->phase == CONN_PHASE_IDLE && c->in.len == c->in_off)
            gw_conn_close(c);
        c = next;
    }
}

void gw_conn_close_all(struct gw *gw, bool flush)
{
    struct gw_conn *c = gw->conns;
    while (c) {
        struct gw_conn *next = c->next;
        if (flush && c->pending_writes > 0 && !c->closing) {
            c->close_after_write = true; /* let the tail of a response reach the client */
        } else if (c->phase != CONN_PHASE_LINGER || !flush) {
            gw_conn_close(c);
        }
        c = next;
    }
}
