/* lg_http: one HTTP/1.1 exchange per connection on libuv, responses parsed by llhttp. */
#include "loadgen/lg_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>
#include <uv.h>

#include "common/err.h"
#include "common/xalloc.h"

int lg_url_parse(struct lg_url *u, const char *url)
{
    memset(u, 0, sizeof(*u));
    const char *p = url;
    if (strncmp(p, "http://", 7) != 0)
        return ERR_INVAL;
    p += 7;
    const char *hend = p + strcspn(p, ":/");
    size_t hl = (size_t)(hend - p);
    if (hl == 0 || hl >= sizeof(u->host))
        return ERR_INVAL;
    memcpy(u->host, p, hl);
    u->port = 80;
    p = hend;
    if (*p == ':') {
        char *e;
        long v = strtol(p + 1, &e, 10);
        if (e == p + 1 || v <= 0 || v > 65535 || (*e && *e != '/'))
            return ERR_INVAL;
        u->port = (int)v;
        p = e;
    }
    size_t bl = strlen(p);
    while (bl > 0 && p[bl - 1] == '/')
        bl--;
    if (bl >= sizeof(u->base))
        return ERR_INVAL;
    memcpy(u->base, p, bl);
    /* IPv4 first: "localhost" should reach a server listening on 127.0.0.1 */
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof(port), "%d", u->port);
    if (getaddrinfo(u->host, port, &hints, &res) != 0 || !res) {
        hints.ai_family = AF_UNSPEC;
        res = NULL;
        if (getaddrinfo(u->host, port, &hints, &res) != 0 || !res)
            return ERR_NOTFOUND;
    }
    memcpy(&u->addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

// ---- one exchange ----

struct xch {
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t wr;
    uv_timer_t timer;
    llhttp_t parser;
    llhttp_settings_t settings;
    char *req; /* the request bytes */
    size_t req_len;
    struct lg_http_cbs cbs;
    void *ud;
    int n_open; /* handles not yet closed */
    int timeout_ms;
    bool done;
    char rbuf[65536];
};

static void xch_on_close(uv_handle_t *h)
{
    struct xch *x = h->data;
    if (--x->n_open == 0) {
        free(x->req);
        free(x);
    }
}

/* report once, then close the handles; x is freed after both close */
__attribute__((format(printf, 3, 4))) static void xch_finish(struct xch *x, int rc, const char *fmt,
                                                             ...)
{
    if (x->done)
        return;
    x->done = true;
    char err[256] = "";
    if (rc) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, sizeof(err), fmt, ap);
        va_end(ap);
    }
    x->cbs.on_done(x->ud, rc, err);
    if (!uv_is_closing((uv_handle_t *)&x->tcp))
        uv_close((uv_handle_t *)&x->tcp, xch_on_close);
    if (!uv_is_closing((uv_handle_t *)&x->timer))
        uv_close((uv_handle_t *)&x->timer, xch_on_close);
}

static int on_headers_complete(llhttp_t *p)
{
    struct xch *x = p->data;
    if (x->cbs.on_head)
        x->cbs.on_head(x->ud, p->status_code);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct xch *x = p->data;
    if (x->cbs.on_body && !x->done)
        x->cbs.on_body(x->ud, at, n);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct xch *x = p->data;
    xch_finish(x, 0, "%s", "");
    return HPE_PAUSED;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)hint;
    struct xch *x = h->data;
    *b = uv_buf_init(x->rbuf, sizeof(x->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct xch *x = s->data;
    if (x->done)
        return;
    if (n == UV_EOF) {
        llhttp_errno_t e = llhttp_finish(&x->parser);
        if (!x->done)
            xch_finish(x, ERR_PROTO, "%s",
                       e == HPE_OK ? "connection closed before the response ended"
                                   : llhttp_errno_name(e));
        return;
    }
    if (n < 0) {
        xch_finish(x, (int)n, "read: %s", uv_strerror((int)n));
        return;
    }
    llhttp_errno_t e = llhttp_execute(&x->parser, b->base, (size_t)n);
    if (e != HPE_OK && e != HPE_PAUSED && !x->done)
        xch_finish(x, ERR_PROTO, "bad response: %s", llhttp_get_error_reason(&x->parser));
}

static void on_write(uv_write_t *w, int status)
{
    struct xch *x = w->data;
    if (status < 0)
        xch_finish(x, status, "write: %s", uv_strerror(status));
}

static void on_connect(uv_connect_t *c, int status)
{
    struct xch *x = c->data;
    if (x->done)
        return;
    if (status < 0) {
        xch_finish(x, status, "connect: %s", uv_strerror(status));
        return;
    }
    uv_tcp_nodelay(&x->tcp, 1);
    uv_buf_t b = uv_buf_init(x->req, (unsigned)x->req_len);
    x->wr.data = x;
    int rc = uv_write(&x->wr, (uv_stream_t *)&x->tcp, &b, 1, on_write);
    if (rc == 0)
        rc = uv_read_start((uv_stream_t *)&x->tcp, on_alloc, on_read);
    if (rc < 0)
        xch_finish(x, rc, "send: %s", uv_strerror(rc));
}

static void on_timeout(uv_timer_t *t)
{
    struct xch *x = t->data;
    xch_finish(x, ERR_TIMEOUT, "%s", "request timed out");
}

int lg_http_start(struct uv_loop_s *loop, const struct lg_url *u, const char *method,
                  const char *path, const char *body, int timeout_ms, const struct lg_http_cbs *cbs,
                  void *ud)
{
    struct xch *x = xcalloc(1, sizeof(*x));
    size_t blen = body ? strlen(body) : 0;
    size_t cap = blen + strlen(path) + strlen(u->base) + strlen(u->host) + strlen(u->api_key) + 256;
    x->req = xmalloc(cap);
    int hl = snprintf(x->req, cap,
                      "%s %s%s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n"
                      "Accept: */*\r\n%s",
                      method, u->base, path, u->host, u->port,
                      body ? "Content-Type: application/json\r\n" : "");
    if (u->api_key[0])
        hl += snprintf(x->req + hl, cap - (size_t)hl, "Authorization: Bearer %s\r\n", u->api_key);
    hl += snprintf(x->req + hl, cap - (size_t)hl, "Content-Length: %zu\r\n\r\n", blen);
    if (blen)
        memcpy(x->req + hl, body, blen);
    x->req_len = (size_t)hl + blen;
    x->cbs = *cbs;
    x->ud = ud;
    x->timeout_ms = timeout_ms;
    llhttp_settings_init(&x->settings);
    x->settings.on_headers_complete = on_headers_complete;
    x->settings.on_body = on_body;
    x->settings.on_message_complete = on_message_complete;
    llhttp_init(&x->parser, HTTP_RESPONSE, &x->settings);
    x->parser.data = x;

    int rc = uv_tcp_init(loop, &x->tcp);
    if (rc < 0) {
        free(x->req);
        free(x);
        return rc;
    }
    x->tcp.data = x;
    x->n_open = 1;
    uv_timer_init(loop, &x->timer);
    x->timer.data = x;
    x->n_open++;
    x->conn.data = x;
    rc = uv_tcp_connect(&x->conn, &x->tcp, (const struct sockaddr *)&u->addr, on_connect);
    if (rc < 0) {
        x->done = true; /* no callback: the caller sees rc */
        uv_close((uv_handle_t *)&x->tcp, xch_on_close);
        uv_close((uv_handle_t *)&x->timer, xch_on_close);
        return rc;
    }
    if (timeout_ms > 0)
        uv_timer_start(&x->timer, on_timeout, (uint64_t)timeout_ms, 0);
    return 0;
}

// ---- blocking fetch ----

struct fetch {
    int status, rc;
    char *body;
    size_t len, cap;
    char err[256];
};

static void fetch_head(void *ud, int status)
{
    ((struct fetch *)ud)->status = status;
}

static void fetch_body(void *ud, const char *p, size_t n)
{
    struct fetch *f = ud;
    if (f->len + n + 1 > f->cap) {
        f->cap = (f->len + n + 1) * 2;
        f->body = xrealloc(f->body, f->cap);
    }
    memcpy(f->body + f->len, p, n);
    f->len += n;
    f->body[f->len] = '\0';
}

static void fetch_done(void *ud, int rc, const char *err)
{
    struct fetch *f = ud;
    f->rc = rc;
    snprintf(f->err, sizeof(f->err), "%s", err);
}

int lg_http_fetch(const struct lg_url *u, const char *method, const char *path, const char *body,
                  int timeout_ms, int *status, char **resp, char *err, size_t errlen)
{
    uv_loop_t loop;
    struct fetch f = {0};
    *status = 0;
    *resp = NULL;
    int rc = uv_loop_init(&loop);
    if (rc < 0) {
        snprintf(err, errlen, "uv_loop_init: %s", uv_strerror(rc));
        return rc;
    }
    const struct lg_http_cbs cbs = {fetch_head, fetch_body, fetch_done};
    rc = lg_http_start(&loop, u, method, path, body, timeout_ms, &cbs, &f);
    if (rc < 0)
        snprintf(f.err, sizeof(f.err), "connect: %s", uv_strerror(rc));
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    if (rc == 0)
        rc = f.rc;
    snprintf(err, errlen, "%s", f.err);
    if (rc < 0) {
        free(f.body);
        return rc;
    }
    *status = f.status;
    *resp = f.body ? f.body : xstrdup("");
    return 0;
}
