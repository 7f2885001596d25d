/* itest: helpers for the gateway integration tests: spawn/kill the real binaries, free loopback
 * ports, and a small raw-socket HTTP/1.1 client that parses Content-Length and chunked bodies. */
#ifndef ITEST_H
#define ITEST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define ITEST_HDRS_MAX 64

struct itest_resp {
    int status;       /* 0 = no response (closed or timed out) */
    char head[16384]; /* raw status line + headers */
    char *body;       /* malloc'd, NUL-terminated (de-chunked) */
    size_t body_len;
    bool closed; /* the server closed the connection after it */
};

/* A free 127.0.0.1 TCP port. */
int itest_free_port(void);
/* fork + exec argv[0] with argv; stdout+stderr appended to log (may be NULL = inherit).
 * Extra environment "K=V" strings in env (NULL-terminated, may be NULL). Returns the pid. */
pid_t itest_spawn(char *const argv[], char *const env[], const char *log);
/* SIGKILL or SIGTERM; itest_wait returns the exit status (-1 on timeout, 128+sig if signalled). */
void itest_kill(pid_t pid, int sig);
int itest_wait(pid_t pid, int timeout_ms);
/* itest_spawn with the log in dir/name.log; the pid is appended to pids (*n of max) for
 * itest_stop_all. */
pid_t itest_spawn_logged(const char *dir, const char *name, char *const argv[], pid_t *pids,
                         int *n, int max);
/* SIGTERM to pids[n-1] .. pids[0], then wait for each up to timeout_ms (then SIGKILL); st[i]:
 * the exit status of pids[i] as itest_wait gives it (-1: it had to be killed). */
void itest_stop_all(const pid_t *pids, int n, int timeout_ms, int *st);
/* Connect to 127.0.0.1:port; -1 on failure. */
int itest_connect(int port);
/* Send all bytes. */
bool itest_send(int fd, const char *data, size_t n);
/* Read one response from fd (reusing bytes buffered from earlier reads in *carry). */
struct itest_conn {
    int fd;
    char buf[1 << 16];
    size_t len;
};
bool itest_read_resp(struct itest_conn *c, struct itest_resp *r, int timeout_ms);
/* Read what the server sends on c into c->buf (left there for itest_read_resp) until it holds
 * needle at least n times; false when the connection ends or timeout_ms passes first. With
 * needle "data: " it waits for n SSE events: a stream that has them has its response head sent
 * and its first tokens generated, which a fixed sleep cannot promise on a loaded machine. */
bool itest_wait_for(struct itest_conn *c, const char *needle, int n, int timeout_ms);
/* Occurrences of needle in c->buf. */
int itest_count(const struct itest_conn *c, const char *needle);
/* One request on a fresh connection: method, path, extra header lines ("K: V\r\n"), body. */
bool itest_http(int port, const char *method, const char *path, const char *headers,
                const char *body, struct itest_resp *r, int timeout_ms);
/* Header value (case-insensitive name) copied into out; false when absent. */
bool itest_header(const struct itest_resp *r, const char *name, char *out, size_t n);
void itest_resp_free(struct itest_resp *r);
/* Poll GET path until it answers want_status (or any status when want_status == 0). */
bool itest_wait_status(int port, const char *path, int want_status, int timeout_ms);
/* Lines of the log dir/name.log (itest_spawn_logged's) that contain needle; 0 when unreadable. */
int itest_log_count(const char *dir, const char *name, const char *needle);
/* Poll until dir/name.log has more than n lines with needle (a service logged an event the test
 * waits for); false after timeout_ms. */
bool itest_log_wait(const char *dir, const char *name, const char *needle, int n, int timeout_ms);
/* Monotonic ms. */
long long itest_now_ms(void);
void itest_sleep_ms(int ms);

#endif
