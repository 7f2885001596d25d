/* fuzz_http: the gateway's HTTP/1.1 connection code (services/gateway/gw_conn.c: llhttp with our
 * callbacks, URL/header/body limits, keep-alive, pipelining, 100-continue, error answers, linger)
 * on arbitrary client bytes. gw_conn.c is included so that a connection can be opened on one end
 * of a socketpair instead of accepted from a listener; the bytes are written to the other end in
 * fuzzed chunks and read by libuv as from a client. The router is replaced by a fake that checks
 * what the parser hands over and answers (at once, later, or as an SSE stream).
 * Input: mode byte, n_seed byte, chunk-size bytes, then the client's bytes. */
#include "gw_conn.c"

#include <sys/socket.h>

#include "fuzz.h"
#include "fuzz_split.h"

static struct gw g_gw;
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
    return 0;
}

/* gw_conn_accept without the listener: the connection owns fd. */
static struct gw_conn *conn_open(struct gw *gw, int fd)
{
    struct gw_conn *c = xcalloc(1, sizeof(*c));
    c->gw = gw;
    c->id = ++gw->next_conn_id;
    uv_tcp_init(&gw->loop, &c->tcp);
    uv_timer_init(&gw->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles_open = 2;
    c->next = gw->conns;
    if (gw->conns)
        gw->conns->prev = c;
    gw->conns = c;
    gw->n_conns++;
    gw_buf_init(&c->in);
    gw_buf_init(&c->url);
    gw_buf_init(&c->field);
    gw_buf_init(&c->value);
    gw_buf_init(&c->body);
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        gw_conn_close(c);
        return NULL;
    }
    llhttp_settings_init(&c->settings);
    c->settings.on_message_begin = on_message_begin;
    c->settings.on_url = on_url;
    c->settings.on_header_field = on_header_field;
    c->settings.on_header_value = on_header_value;
    c->settings.on_headers_complete = on_headers_complete;
    c->settings.on_body = on_body;
    c->settings.on_message_complete = on_message_complete;
    llhttp_init(&c->parser, HTTP_REQUEST, &c->settings);
    c->parser.data = c;
    c->phase = CONN_PHASE_IDLE;
    timer_arm(c, gw->cfg->header_timeout_ms);
    c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
    if (!c->reading)
        gw_conn_close(c);
    return c;
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
    g_gw.draining = (g_mode & 2) != 0;
    g_n_pending = 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    int big = 1 << 20;
    (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    if (!conn_open(&g_gw, sv[0])) {
        close(sv[1]);
        uv_run(&g_gw.loop, UV_RUN_DEFAULT);
        return 0;
    }
    size_t off = 0;
    for (size_t i = 0; i < n_cuts; i++) {
        if (cuts[i] > 0) {
            ssize_t w = send(sv[1], f.p + off, cuts[i], MSG_NOSIGNAL);
            (void)w; /* a full socket or a closed conn just loses the rest, as with a client */
            off += cuts[i];
        }
        uv_run(&g_gw.loop, UV_RUN_NOWAIT);
        drain_peer(sv[1]);
        if (!(g_mode & 4))
            answer_pending();
        uv_run(&g_gw.loop, UV_RUN_NOWAIT);
        drain_peer(sv[1]);
    }
    if (g_mode & 8)
        answer_pending(); /* answer before the client hangs up */
    shutdown(sv[1], SHUT_WR); /* client EOF */
    for (int i = 0; i < 4 && g_gw.conns; i++) {
        uv_run(&g_gw.loop, UV_RUN_NOWAIT);
        drain_peer(sv[1]);
    }
    answer_pending();
    while (g_gw.conns) {
        gw_conn_close(g_gw.conns); /* idempotent; the close callbacks unlink and free it */
        uv_run(&g_gw.loop, UV_RUN_DEFAULT);
    }
    close(sv[1]);
    if (g_gw.n_conns != 0)
        __builtin_trap();
    return 0;
}
