/* fuzz_http: the gateway's HTTP/1.1 connection code (services/gateway/gw_conn.c: llhttp with our
 * callbacks, URL/header/body limits, keep-alive, pipelining, 100-continue, error answers, linger)
 * on arbitrary client bytes. A real listener (a unix socket opened as the gateway's uv_tcp_t)
 * hands each client to gw_conn_accept; the input is written by the client in fuzzed chunks and
 * read by libuv. The router (gw_route_dispatch) is replaced by a fake that checks what the parser
 * hands over and answers (at once, later, or as an SSE stream).
 * Input: mode byte, n_seed byte, chunk-size bytes, then the client's bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <llhttp.h>
#include <uv.h>

#include "common/log.h"
#include "gw.h"
#include "gw_cfg.h"
#include "gw_conn.h"
#include "gw_exch.h"
#include "gw_route.h"

#include "fuzz.h"
#include "fuzz_split.h"

static struct gw g_gw;
static struct sockaddr_un g_addr;

static void on_conn(uv_stream_t *server, int status);
static struct gw_cfg g_cfg;
static uint8_t g_mode;
static struct gw_exch *g_pending[64];
static int g_n_pending;
static int g_n_dispatched;

// ---- stand-ins for gw.c and gw_route.c ----

void gw_check_drained(struct gw *gw)
{
    (void)gw;
}

static void on_abort(struct gw_exch *x)
{
    (void)x;
}

static void answer(struct gw_exch *x)
{
    if (x->path[0] == '/' && x->path[1] == 's') {
        gw_exch_stream_begin(x);
        gw_exch_stream_send(x, "data: {}\n\n", 10);
        gw_exch_stream_end(x);
    } else {
        gw_exch_respond(x, 200, "text/plain", NULL, x->body, x->body_len);
    }
}

void gw_route_dispatch(struct gw *gw, struct gw_exch *x)
{
    (void)gw;
    g_n_dispatched++;
    /* what the parser promises the handlers */
    if (!x->path || !x->method_name || !x->body || x->body[x->body_len] != '\0')
        __builtin_trap();
    if ((size_t)x->body_len > (size_t)g_cfg.body_max || x->n_headers > g_cfg.headers_max)
        __builtin_trap();
    for (int i = 0; i < x->n_headers; i++)
        if (!x->headers[i].name || !x->headers[i].value)
            __builtin_trap();
    if (strlen(x->req_id) == 0 || strlen(x->req_id) >= sizeof(x->req_id))
        __builtin_trap();
    (void)gw_exch_header(x, "content-type");
    x->route = "fuzz";
    x->on_abort = on_abort;
    if ((g_mode & 1) || g_n_pending == (int)(sizeof(g_pending) / sizeof(g_pending[0])))
        answer(x);
    else
        g_pending[g_n_pending++] = x;
}

static void answer_pending(void)
{
    while (g_n_pending > 0) {
        struct gw_exch *x = g_pending[--g_n_pending];
        answer(x); /* also when its client is gone: the exchange must end exactly once */
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *args[] = {(char *)"fuzz_http", NULL};
    if (gw_cfg_parse(&g_cfg, 1, args) != 0)
        abort();
    /* small limits so that the fuzzer reaches them */
    g_cfg.body_max = 2048;
    g_cfg.url_max = 256;
    g_cfg.header_field_max = 512;
    g_cfg.headers_total_max = 2048;
    g_cfg.headers_max = 16;
    g_cfg.max_conns = 4;
    log_init("fuzz_http", LOG_LEVEL_OFF);
    g_gw.cfg = &g_cfg;
    if (uv_loop_init(&g_gw.loop) != 0)
        abort();
    /* the listener is a unix socket in the abstract namespace opened as the gateway's uv_tcp_t:
     * no files, no TIME_WAIT, and the connection code path is the real one (gw_conn_accept) */
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    memset(&g_addr, 0, sizeof(g_addr));
    g_addr.sun_family = AF_UNIX;
    snprintf(g_addr.sun_path + 1, sizeof(g_addr.sun_path) - 1, "tern-fuzz-http-%d", (int)getpid());
    if (lfd < 0 || bind(lfd, (const struct sockaddr *)&g_addr, sizeof(g_addr)) != 0 ||
        uv_tcp_init(&g_gw.loop, &g_gw.listener) != 0 || uv_tcp_open(&g_gw.listener, lfd) != 0 ||
        uv_listen((uv_stream_t *)&g_gw.listener, 128, on_conn) != 0)
        abort();
    return 0;
}

/* The listener's connection callback, as in the gateway: gw_conn_accept takes it from here. */
static void on_conn(uv_stream_t *server, int status)
{
    (void)server;
    if (status == 0)
        gw_conn_accept(&g_gw);
}

/* A client connected to the listener; returns its fd once the gateway has accepted it. */
static int client_open(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)&g_addr, sizeof(g_addr)) != 0) {
        close(fd);
        return -1;
    }
    for (int i = 0; i < 100 && !g_gw.conns; i++)
        uv_run(&g_gw.loop, UV_RUN_NOWAIT);
    return fd;
}

static void drain_peer(int fd)
{
    char buf[65536];
    while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
        ;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    g_mode = fz_u8(&f);
    size_t n_seed;
    const uint8_t *seed = fz_take(&f, FZ_SPLIT_MAX, &n_seed);
    size_t cuts[FZ_SPLIT_MAX + 2], n_cuts;
    fz_split(seed, n_seed, f.n, cuts, &n_cuts, sizeof(cuts) / sizeof(cuts[0]));
    g_gw.draining = false;
    g_n_pending = 0;
    int cfd = client_open();
    if (cfd < 0)
        abort(); /* the harness itself is broken: say so */
    if (!g_gw.conns) {
        close(cfd);
        return 0; /* not accepted (over the cap): nothing to parse */
    }
    g_gw.draining = (g_mode & 2) != 0; /* SIGTERM seen after this client connected */
    int big = 1 << 20;
    (void)setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    size_t off = 0;
    for (size_t i = 0; i < n_cuts; i++) {
        if (cuts[i] > 0) {
            ssize_t w = send(cfd, f.p + off, cuts[i], MSG_NOSIGNAL);
            (void)w; /* a full socket or a closed conn just loses the rest, as with a client */
            off += cuts[i];
        }
        uv_run(&g_gw.loop, UV_RUN_NOWAIT);
        drain_peer(cfd);
        if (!(g_mode & 4))
            answer_pending();
        uv_run(&g_gw.loop, UV_RUN_NOWAIT);
        drain_peer(cfd);
    }
    if (g_mode & 8)
        answer_pending(); /* answer before the client hangs up */
    shutdown(cfd, SHUT_WR); /* client EOF */
    for (int i = 0; i < 4 && g_gw.conns; i++) {
        uv_run(&g_gw.loop, UV_RUN_NOWAIT);
        drain_peer(cfd);
    }
    answer_pending();
    while (g_gw.conns) {
        gw_conn_close(g_gw.conns); /* idempotent; the close callbacks unlink and free it */
        uv_run(&g_gw.loop, UV_RUN_DEFAULT);
    }
    close(cfd);
    if (g_gw.n_conns != 0)
        __builtin_trap();
    return 0;
}
