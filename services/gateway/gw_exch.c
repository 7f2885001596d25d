/* gw_exch: the per-request exchange: refcount, header lookup, and the response writers.
 * Every dispatched exchange ends with exactly one gw_exch_respond() or gw_exch_stream_end(),
 * also when the client is already gone (then nothing is written). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <llhttp.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "gw_exch.h"

#include "gw.h"
#include "gw_arena.h"
#include "common/buf.h"
#include "gw_conn.h"
#include "gw_http.h"
#include "gw_metrics.h"

void gw_exch_ref(struct gw_exch *x)
{
    x->refs++;
}

void gw_exch_unref(struct gw_exch *x)
{
    if (!x || --x->refs > 0)
        return;
    gw_arena_destroy(x->arena); /* x lives in its own arena */
}

const char *gw_exch_header(const struct gw_exch *x, const char *name)
{
    for (int i = 0; i < x->n_headers; i++)
        if (strcasecmp(x->headers[i].name, name) == 0)
            return x->headers[i].value;
    return NULL;
}

static void head(struct gw_exch *x, struct buf *b, int status, const char *ctype,
                 const char *extra)
{
    bool keep = x->keep_alive && !x->gw->draining;
    buf_printf(b, "HTTP/1.1 %d %s\r\n", status, gw_http_reason(status));
    if (ctype)
        buf_printf(b, "Content-Type: %s\r\n", ctype);
    buf_printf(b, "X-Request-Id: %s\r\nConnection: %s\r\n", x->req_id,
                  keep ? "keep-alive" : "close");
    if (x->cors_origin)
        buf_printf(b,
                      "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n"
                      "Access-Control-Expose-Headers: X-Request-Id\r\n",
                      x->cors_origin);
    if (extra)
        buf_puts(b, extra);
}

static void finish(struct gw_exch *x)
{
    x->done = true;
    x->gw->n_inflight--;
    gw_metrics_http(x->gw->metrics, x->route ? x->route : "other", x->method_name, x->status);
    if (x->conn)
        gw_conn_exch_done(x->conn, x);
    gw_check_drained(x->gw);
    gw_exch_unref(x); /* the route's ref */
}

void gw_exch_respond(struct gw_exch *x, int status, const char *ctype, const char *extra,
                     const char *body, size_t n)
{
    if (x->done)
        return;
    x->status = status;
    x->started = true;
    if (x->conn) {
        struct buf b;
        buf_init(&b);
        head(x, &b, status, ctype, extra);
        buf_printf(&b, "Content-Length: %zu\r\n\r\n", n);
        if (x->method != HTTP_HEAD)
            buf_append(&b, body, n);
        gw_conn_write(x->conn, b.data, b.len);
        buf_deinit(&b);
    }
    finish(x);
}

void gw_exch_error(struct gw_exch *x, int status, const char *type, const char *param,
                   const char *code, const char *extra, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cJSON *root = cJSON_CreateObject();
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", msg);
    cJSON_AddStringToObject(err, "type", type ? type : "invalid_request_error");
    if (param)
        cJSON_AddStringToObject(err, "param", param);
    else
        cJSON_AddNullToObject(err, "param");
    if (code)
        cJSON_AddStringToObject(err, "code", code);
    else
        cJSON_AddNullToObject(err, "code");
    char *s = cJSON_PrintUnformatted(root);
    if (x->streaming) {
        /* after the head: an error event, then [DONE] */
        struct buf b;
        buf_init(&b);
        if (x->on_stream_error)
            x->on_stream_error(x->stream_error_ctx, err, &b);
        else
            buf_printf(&b, "data: %s\n\ndata: [DONE]\n\n", s);
        gw_exch_stream_send(x, b.data, b.len);
        buf_deinit(&b);
        x->status = status; /* counted with the error status */
        gw_exch_stream_end(x);
    } else {
        gw_exch_respond(x, status, "application/json", extra, s, strlen(s));
    }
    cJSON_Delete(root);
    free(s);
}

void gw_exch_stream_begin(struct gw_exch *x)
{
    if (x->done || x->started)
        return;
    x->status = 200;
    x->started = true;
    x->streaming = true;
    if (!x->conn)
        return;
    struct buf b;
    buf_init(&b);
    head(x, &b, 200, "text/event-stream",
         "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n");
    buf_puts(&b, "\r\n");
    gw_conn_write(x->conn, b.data, b.len);
    buf_deinit(&b);
}

void gw_exch_stream_send(struct gw_exch *x, const char *data, size_t n)
{
    if (x->done || !x->conn || n == 0)
        return;
    struct buf b;
    buf_init(&b);
    buf_printf(&b, "%zx\r\n", n);
    buf_append(&b, data, n);
    buf_puts(&b, "\r\n");
    gw_conn_write(x->conn, b.data, b.len);
    buf_deinit(&b);
}

void gw_exch_stream_end(struct gw_exch *x)
{
    if (x->done)
        return;
    if (x->conn)
        gw_conn_write(x->conn, "0\r\n\r\n", 5);
    finish(x);
}
