/* itest: process and raw HTTP helpers for the gateway integration tests. */
#include "itest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

long long itest_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void itest_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int itest_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

pid_t itest_spawn(char *const argv[], char *const env[], const char *log)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (log) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
    }
    for (int i = 0; env && env[i]; i++)
        putenv(env[i]);
    execve(argv[0], argv, environ);
    _exit(127);
}

void itest_kill(pid_t pid, int sig)
{
    if (pid > 0)
        kill(pid, sig);
}

int itest_wait(pid_t pid, int timeout_ms)
{
    long long end = itest_now_ms() + timeout_ms;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0)
            return -2;
        if (itest_now_ms() > end)
            return -1;
        itest_sleep_ms(10);
    }
}

pid_t itest_spawn_logged(const char *dir, const char *name, char *const argv[], pid_t *pids,
                         int *n, int max)
{
    char log[512];
    snprintf(log, sizeof(log), "%s/%s.log", dir, name);
    pid_t p = itest_spawn(argv, NULL, log);
    if (p > 0 && *n < max)
        pids[(*n)++] = p;
    return p;
}

void itest_stop_all(const pid_t *pids, int n, int timeout_ms, int *st)
{
    for (int i = n - 1; i >= 0; i--)
        itest_kill(pids[i], SIGTERM);
    for (int i = n - 1; i >= 0; i--) {
        st[i] = itest_wait(pids[i], timeout_ms);
        if (st[i] == -1) {
            itest_kill(pids[i], SIGKILL);
            itest_wait(pids[i], 5000);
        }
    }
}

int itest_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

bool itest_send(int fd, const char *data, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        data += w;
        n -= (size_t)w;
    }
    return true;
}

/* read more bytes into c->buf; 0 on EOF, -1 on timeout/error */
static int fill(struct itest_conn *c, long long deadline)
{
    if (c->len == sizeof(c->buf))
        return -1;
    int left = (int)(deadline - itest_now_ms());
    if (left <= 0)
        return -1;
    struct pollfd p = {c->fd, POLLIN, 0};
    if (poll(&p, 1, left) <= 0)
        return -1;
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    if (n < 0)
        return errno == ECONNRESET ? 0 : -1;
    c->len += (size_t)n;
    return n == 0 ? 0 : 1;
}

static void consume(struct itest_conn *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

static void body_add(struct itest_resp *r, const char *p, size_t n)
{
    r->body = realloc(r->body, r->body_len + n + 1);
    memcpy(r->body + r->body_len, p, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
}

bool itest_read_resp(struct itest_conn *c, struct itest_resp *r, int timeout_ms)
{
    memset(r, 0, sizeof(*r));
    r->body = calloc(1, 1);
    long long deadline = itest_now_ms() + timeout_ms;
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4))) {
        int f = fill(c, deadline);
        if (f <= 0) {
            r->closed = f == 0;
            return false;
        }
    }
    size_t hl = (size_t)(end - c->buf) + 4;
    size_t copy = hl < sizeof(r->head) - 1 ? hl : sizeof(r->head) - 1;
    memcpy(r->head, c->buf, copy);
    r->head[copy] = '\0';
    consume(c, hl);
    if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1)
        return false;
    char v[64];
    bool chunked =
        itest_header(r, "transfer-encoding", v, sizeof(v)) && strcasecmp(v, "chunked") == 0;
    if (chunked) {
        for (;;) {
            char *le;
            while (!(le = memmem(c->buf, c->len, "\r\n", 2)))
                if (fill(c, deadline) <= 0)
                    return false;
            size_t sz = strtoul(c->buf, NULL, 16);
            size_t ll = (size_t)(le - c->buf) + 2;
            while (c->len < ll + sz + 2)
                if (fill(c, deadline) <= 0)
                    return false;
            body_add(r, c->buf + ll, sz);
            consume(c, ll + sz + 2);
            if (sz == 0)
                break;
        }
    } else if (itest_header(r, "content-length", v, sizeof(v))) {
        size_t cl = strtoul(v, NULL, 10);
        while (c->len < cl)
            if (fill(c, deadline) <= 0)
                return false;
        body_add(r, c->buf, cl);
        consume(c, cl);
    }
    if (itest_header(r, "connection", v, sizeof(v)) && strcasecmp(v, "close") == 0)
        r->closed = true;
    return true;
}

int itest_count(const struct itest_conn *c, const char *needle)
{
    size_t nl = strlen(needle);
    int k = 0;
    const char *p = c->buf, *end = c->buf + c->len;
    while ((p = memmem(p, (size_t)(end - p), needle, nl)) != NULL) {
        k++;
        p += nl;
    }
    return k;
}

bool itest_wait_for(struct itest_conn *c, const char *needle, int n, int timeout_ms)
{
    long long deadline = itest_now_ms() + timeout_ms;
    while (itest_count(c, needle) < n)
        if (fill(c, deadline) <= 0)
            return false;
    return true;
}

bool itest_http(int port, const char *method, const char *path, const char *headers,
                const char *body, struct itest_resp *r, int timeout_ms)
{
    struct itest_conn *c = calloc(1, sizeof(*c));
    c->fd = itest_connect(port);
    if (c->fd < 0) {
        memset(r, 0, sizeof(*r));
        r->body = calloc(1, 1); /* callers may inspect the body of a failed request */
        free(c);
        return false;
    }
    size_t bl = body ? strlen(body) : 0;
    size_t cap = 1024 + (headers ? strlen(headers) : 0) + strlen(path) + bl;
    char *req = malloc(cap);
    int n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%zu\r\n\r\n", method, path,
                     headers ? headers : "", "Content-Length: ", bl);
    bool ok = itest_send(c->fd, req, (size_t)n) && (!bl || itest_send(c->fd, body, bl));
    free(req);
    ok = ok && itest_read_resp(c, r, timeout_ms);
    close(c->fd);
    free(c);
    return ok;
}

bool itest_header(const struct itest_resp *r, const char *name, char *out, size_t n)
{
    size_t nl = strlen(name);
    const char *p = strstr(r->head, "\r\n");
    while (p && p[2] != '\r') {
        p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            size_t l = e ? (size_t)(e - v) : strlen(v);
            if (l >= n)
                l = n - 1;
            memcpy(out, v, l);
            out[l] = '\0';
            return true;
        }
        p = strstr(p, "\r\n");
    }
    return false;
}

void itest_resp_free(struct itest_resp *r)
{
    free(r->body);
    r->body = NULL;
}

bool itest_wait_status(int port, const char *path, int want_status, int timeout_ms)
{
    long long end = itest_now_ms() + timeout_ms;
    while (itest_now_ms() < end) {
        struct itest_resp r;
        bool ok = itest_http(port, "GET", path, NULL, NULL, &r, 1000);
        int st = r.status;
        itest_resp_free(&r);
        if (ok && (want_status == 0 || st == want_status))
            return true;
        itest_sleep_ms(50);
    }
    return false;
}

int itest_log_count(const char *dir, const char *name, const char *needle)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.log", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int k = 0;
    char line[4096];
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle))
            k++;
    fclose(f);
    return k;
}

bool itest_log_wait(const char *dir, const char *name, const char *needle, int n, int timeout_ms)
{
    long long end = itest_now_ms() + timeout_ms;
    while (itest_log_count(dir, name, needle) <= n) {
        if (itest_now_ms() > end)
            return false;
        itest_sleep_ms(20);
    }
    return true;
}
