/* lg_http: a small HTTP/1.1 client on libuv + llhttp for the load generator. One request per
 * connection ("Connection: close"), the response body handed over as it arrives (chunked
 * transfer decoded by llhttp). lg_http_fetch is the same path run to completion on its own loop. */
#ifndef LOADGEN_LG_HTTP_H
#define LOADGEN_LG_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* uv.h stays out of this header: callers only need the loop type. */
struct uv_loop_s;

struct lg_url {
    char host[256];
    int port;
    char base[256];    /* path prefix without a trailing '/', often "" */
    char api_key[256]; /* sent as "Authorization: Bearer <key>" when not empty */
    struct sockaddr_storage addr;
};

/* Parse "http://host[:port][/prefix]" and resolve host (blocking getaddrinfo).
 * ERR_INVAL for a malformed URL or another scheme, ERR_NOTFOUND when the host does not resolve. */
int lg_url_parse(struct lg_url *u, const char *url);

struct lg_http_cbs {
    /* status line + headers parsed */
    void (*on_head)(void *ud, int status);
    /* a piece of the (de-chunked) body; p is only valid during the call */
    void (*on_body)(void *ud, const char *p, size_t n);
    /* last callback, exactly once: 0 = complete response, else a negative status
     * (-errno-like libuv codes for socket errors, ERR_PROTO for a bad/truncated response,
     * ERR_TIMEOUT). err holds a one-line reason. */
    void (*on_done)(void *ud, int rc, const char *err);
};

/* Start method path on loop; body may be NULL (no body) or JSON text (copied). timeout_ms
 * bounds the whole exchange (0 = none). The request frees itself after on_done.
 * Returns 0, or a negative status when it could not start (no callback is called then). */
int lg_http_start(struct uv_loop_s *loop, const struct lg_url *u, const char *method,
                  const char *path, const char *body, int timeout_ms, const struct lg_http_cbs *cbs,
                  void *ud);

/* Blocking: run one request to completion on a private loop. *status = HTTP status (0 if
 * none); *resp = malloc'd NUL-terminated body (caller frees; may be NULL on error).
 * Returns 0 when a full response arrived (any status), else a negative status with err set. */
int lg_http_fetch(const struct lg_url *u, const char *method, const char *path, const char *body,
                  int timeout_ms, int *status, char **resp, char *err, size_t errlen);

#endif
