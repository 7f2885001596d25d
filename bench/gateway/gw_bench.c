/* gw_bench: load generator for tern-gateway (run it against a gateway in front of
 * tern-fake-sched, see bench/gateway/run.sh). Two modes:
 *   rps:    C keep-alive connections send short non-streamed chat requests back to back for
 *           S seconds: requests/s, latency p50/p99.
 *   stream: C concurrent streamed chat requests of T tokens each, repeated for S seconds:
 *           tokens/s delivered, and every stream checked to carry exactly T tokens.
 * Both read the gateway's own process_cpu_seconds_total (getrusage inside the gateway) from
 * /metrics before and after, and print gateway CPU per request / per token.
 * Usage: gw_bench --port P --mode rps|stream [--conns C] [--seconds S] [--tokens T] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LAT_MAX 2000000

struct bench {
    int port;
    bool stream;
    int conns;
    double seconds;
    int tokens;
    double t_end;
    pthread_mutex_t mu;
    long long n_req, n_err, n_tokens, n_bad_streams;
    double *lat;
    long long n_lat;
};

struct conn {
    int fd;
    char buf[1 << 16];
    size_t len;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int conn_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool fill(struct conn *c)
{
    if (c->len == sizeof(c->buf))
        return false;
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    if (r <= 0)
        return false;
    c->len += (size_t)r;
    return true;
}

static void consume(struct conn *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

static size_t count_sub(const char *s, size_t n, const char *sub)
{
    size_t k = 0, m = strlen(sub);
    for (const char *p = s; (p = memmem(p, n - (size_t)(p - s), sub, m)) != NULL; p += m)
        k++;
    return k;
}

/* one response; status out; *tokens = " tok" pieces in the body */
static bool read_resp(struct conn *c, int *status, long long *tokens)
{
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
        if (!fill(c))
            return false;
    size_t hl = (size_t)(end - c->buf) + 4;
    if (sscanf(c->buf, "HTTP/1.1 %d", status) != 1)
        return false;
    bool chunked = memmem(c->buf, hl, "Transfer-Encoding: chunked", 26) != NULL;
    const char *cl = memmem(c->buf, hl, "Content-Length: ", 16);
    size_t clen = cl ? strtoul(cl + 16, NULL, 10) : 0;
    consume(c, hl);
    *tokens = 0;
    if (!chunked) {
        while (c->len < clen)
            if (!fill(c))
                return false;
        *tokens = (long long)count_sub(c->buf, clen, "tok");
        consume(c, clen);
        return true;
    }
    for (;;) {
        char *le;
        while (!(le = memmem(c->buf, c->len, "\r\n", 2)))
            if (!fill(c))
                return false;
        size_t sz = strtoul(c->buf, NULL, 16);
        size_t ll = (size_t)(le - c->buf) + 2;
        while (c->len < ll + sz + 2)
            if (!fill(c))
                return false;
        *tokens += (long long)count_sub(c->buf + ll, sz, "\"content\":\" tok\"");
        consume(c, ll + sz + 2);
        if (sz == 0)
            return true;
    }
}

static void *worker(void *p)
{
    struct bench *b = p;
    struct conn *c = calloc(1, sizeof(*c));
    c->fd = conn_open(b->port);
    char body[512], req[1024];
    snprintf(body, sizeof(body),
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello there, how are you?\"}],"
             "\"max_tokens\":%d,\"stream\":%s}",
             b->tokens, b->stream ? "true" : "false");
    int n = snprintf(req, sizeof(req),
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    long long n_req = 0, n_err = 0, n_tok = 0, n_bad = 0;
    double *lat = malloc(sizeof(double) * 200000);
    long long n_lat = 0;
    while (c->fd >= 0 && now_s() < b->t_end) {
        double t0 = now_s();
        int status = 0;
        long long tok = 0;
        if (!send_all(c->fd, req, (size_t)n) || !read_resp(c, &status, &tok)) {
            n_err++;
            close(c->fd);
            c->len = 0;
            c->fd = conn_open(b->port);
            continue;
        }
        if (status != 200) {
            n_err++;
            continue;
        }
        n_req++;
        n_tok += tok;
        if (b->stream && tok != b->tokens)
            n_bad++;
        if (n_lat < 200000)
            lat[n_lat++] = now_s() - t0;
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    pthread_mutex_lock(&b->mu);
    b->n_req += n_req;
    b->n_err += n_err;
    b->n_tokens += n_tok;
    b->n_bad_streams += n_bad;
    for (long long i = 0; i < n_lat && b->n_lat < LAT_MAX; i++)
        b->lat[b->n_lat++] = lat[i];
    pthread_mutex_unlock(&b->mu);
    free(lat);
    return NULL;
}

/* the gateway's process_cpu_seconds_total, or -1 */
static double gw_cpu(int port)
{
    struct conn *c = calloc(1, sizeof(*c));
    double v = -1;
    c->fd = conn_open(port);
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (c->fd >= 0 && send_all(c->fd, req, strlen(req))) {
        while (fill(c)) {
        }
        c->buf[c->len < sizeof(c->buf) ? c->len : sizeof(c->buf) - 1] = '\0';
        const char *p = strstr(c->buf, "\nprocess_cpu_seconds_total ");
        if (p)
            v = strtod(p + 27, NULL);
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return v;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    struct bench b = {.port = 0, .conns = 16, .seconds = 5, .tokens = 8};
    const char *mode = "rps";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            b.port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mode"))
            mode = argv[i + 1];
        else if (!strcmp(argv[i], "--conns"))
            b.conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            b.seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens"))
            b.tokens = atoi(argv[i + 1]);
    }
    if (b.port <= 0 || b.conns <= 0 || b.conns > 4096 || b.tokens <= 0) {
        fprintf(stderr, "usage: gw_bench --port P --mode rps|stream [--conns C] [--seconds S] "
                        "[--tokens T]\n");
        return 2;
    }
    b.stream = strcmp(mode, "stream") == 0;
    pthread_mutex_init(&b.mu, NULL);
    b.lat = malloc(sizeof(double) * LAT_MAX);
    pthread_t *th = calloc((size_t)b.conns, sizeof(pthread_t));
    double cpu0 = gw_cpu(b.port);
    double t0 = now_s();
    b.t_end = t0 + b.seconds;
    for (int i = 0; i < b.conns; i++)
        pthread_create(&th[i], NULL, worker, &b);
    for (int i = 0; i < b.conns; i++)
        pthread_join(th[i], NULL);
    double wall = now_s() - t0;
    double cpu1 = gw_cpu(b.port);
    qsort(b.lat, (size_t)b.n_lat, sizeof(double), cmp_d);
    double p50 = b.n_lat ? b.lat[b.n_lat / 2] : 0, p99 = b.n_lat ? b.lat[b.n_lat * 99 / 100] : 0;
    double cpu = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1;
    printf("mode=%s conns=%d tokens=%d wall_s=%.2f requests=%lld errors=%lld req_per_s=%.1f "
           "p50_ms=%.2f p99_ms=%.2f gw_cpu_s=%.3f gw_cpu_us_per_req=%.1f",
           mode, b.conns, b.tokens, wall, b.n_req, b.n_err, (double)b.n_req / wall, p50 * 1e3,
           p99 * 1e3, cpu, cpu >= 0 && b.n_req ? cpu * 1e6 / (double)b.n_req : -1);
    if (b.stream)
        printf(" tokens_total=%lld tok_per_s=%.0f gw_cpu_us_per_token=%.2f bad_streams=%lld",
               b.n_tokens, (double)b.n_tokens / wall,
               cpu >= 0 && b.n_tokens ? cpu * 1e6 / (double)b.n_tokens : -1, b.n_bad_streams);
    printf("\n");
    free(th);
    free(b.lat);
    return b.n_err || b.n_bad_streams ? 1 : 0;
}
