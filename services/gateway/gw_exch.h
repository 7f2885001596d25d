/* gw_exch: one HTTP request and its response (the "exchange"), refcounted, living in its own
 * arena. The connection holds one ref while it is current; the route holds one until the
 * response is done; async work and the scheduler callbacks hold their own. */
#ifndef GW_EXCH_H
#define GW_EXCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw;
struct gw_arena;
struct gw_conn;

#define GW_HEADERS_MAX 128

struct gw_header {
    const char *name;  /* arena */
    const char *value; /* arena */
};

struct gw_exch;
struct buf;
struct cJSON;
typedef void (*gw_exch_abort_cb)(struct gw_exch *x);
/* An error after the stream head: append the framed event(s) for error (the OpenAI error
 * object: message, type, param, code) to out; the stream then ends. ctx: stream_error_ctx */
typedef void (*gw_exch_stream_error_cb)(void *ctx, const struct cJSON *error, struct buf *out);

struct gw_exch {
    struct gw *gw;
    struct gw_conn *conn;   /* NULL once the client is gone */
    struct gw_arena *arena; /* everything below that is a pointer lives here */
    int refs;
    int method; /* llhttp_method_t */
    const char *method_name;
    const char *path;  /* without query */
    const char *query; /* after '?', or NULL */
    struct gw_header headers[GW_HEADERS_MAX];
    int n_headers;
    const char *body; /* NUL-terminated copy */
    size_t body_len;
    bool keep_alive;
    char req_id[72];           /* X-Request-Id in and out */
    const char *cors_origin;   /* Access-Control-Allow-Origin value when the origin is allowed */
    uint64_t t_start_ns;       /* request complete, monotonic */
    const char *route;         /* handler name for metrics */
    int status;                /* response status once sent */
    bool started;              /* response head sent */
    bool streaming;            /* chunked SSE response */
    bool done;                 /* last byte queued */
    gw_exch_abort_cb on_abort; /* client went away before done (called once) */
    gw_exch_stream_error_cb on_stream_error; /* NULL: "data: {"error":...}" then [DONE] */
    void *stream_error_ctx;                  /* on_stream_error's ctx */
    void *ctx;                 /* handler state */
};

void gw_exch_ref(struct gw_exch *x);
/* Drops a ref; at zero the arena (and its cleanups) are destroyed. */
void gw_exch_unref(struct gw_exch *x);
/* Case-insensitive header lookup; NULL when absent. */
const char *gw_exch_header(const struct gw_exch *x, const char *name);
/* Whole response. extra: more header lines, each ending in "\r\n", or NULL. */
void gw_exch_respond(struct gw_exch *x, int status, const char *ctype, const char *extra,
                     const char *body, size_t n);
/* OpenAI error body {"error":{"message","type","param","code"}}; param/code may be NULL. */
void gw_exch_error(struct gw_exch *x, int status, const char *type, const char *param,
                   const char *code, const char *extra, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* SSE over chunked encoding: head, events (already framed), end. */
void gw_exch_stream_begin(struct gw_exch *x);
void gw_exch_stream_send(struct gw_exch *x, const char *data, size_t n);
void gw_exch_stream_end(struct gw_exch *x);

#endif
