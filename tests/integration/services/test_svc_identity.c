/* Integration: worker identity and the worker's operator signals (issue 20 items 4 and 5).
 *   Two live workers with one --worker-id: the first keeps it (registered once, never reset, the
 *   scheduler never logs it lost or replaced); the second is refused with a line on both sides
 *   (scheduler ev=register_refused "duplicate worker id", worker ev=register_refused naming
 *   --worker-id), retries every few seconds, and sends no READY=1 while refused; once the first
 *   dies, the second takes the id and then sends READY=1.
 *   A worker whose scheduler does not answer logs ev=register_waiting with the reason every few
 *   seconds, puts it in STATUS= and never sends READY=1.
 *   The default worker id carries the host name. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "svc_harness.h"
#include "test.h"

#define HB "100"
#define DEAD "1000"

static char dir[64], gw_ep[128], wk_ep[128];

/* what a fake service manager collects from NOTIFY_SOCKET */
struct notify {
    int fd;
    char path[100]; /* fits sun_path */
    char env[128];
    bool ready, status;
    char last_status[512];
};

static void notify_open(struct notify *n, const char *name)
{
    memset(n, 0, sizeof *n);
    snprintf(n->path, sizeof n->path, "%s/%s.notify", dir, name);
    snprintf(n->env, sizeof n->env, "NOTIFY_SOCKET=%s", n->path);
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", n->path);
    if (n->fd < 0 || bind(n->fd, (struct sockaddr *)&a, sizeof a) < 0)
        fprintf(stderr, "notify socket %s: %s\n", n->path, strerror(errno));
}

static void notify_poll(struct notify *n)
{
    char buf[1024];
    ssize_t r;
    while (n->fd >= 0 && (r = recv(n->fd, buf, sizeof buf - 1, 0)) > 0) {
        buf[r] = '\0';
        if (strstr(buf, "READY=1"))
            n->ready = true;
        const char *st = strstr(buf, "STATUS=");
        if (st) {
            n->status = true;
            snprintf(n->last_status, sizeof n->last_status, "%s", st + 7);
        }
    }
}

static int count(const struct svc_proc *p, const char *needle)
{
    char *s = file_read(p->log, NULL);
    int n = 0;
    for (const char *q = s; q && (q = strstr(q, needle)) != NULL; q += strlen(needle))
        n++;
    free(s);
    return n;
}

static bool wait_log(const struct svc_proc *p, const char *needle, int ms, struct notify *n)
{
    for (uint64_t t0 = clock_now_ms(); clock_now_ms() - t0 < (uint64_t)ms;) {
        if (n)
            notify_poll(n);
        if (count(p, needle) > 0)
            return true;
        usleep(50 * 1000);
    }
    return false;
}

static int start_worker(struct svc_proc *p, const char *name, const char *id, const char *ep,
                        const struct notify *n)
{
    const char *a[] = {"--engine", "fake", "--scheduler-endpoint", ep, "--heartbeat-ms", HB,
                       "--dead-after-ms", DEAD, "--fake-vocab", "1000", "--worker-id", id, NULL};
    if (!id[0])
        a[10] = NULL; /* the default id */
    const char *env[] = {n ? n->env : NULL, NULL};
    return svc_spawn_env(p, dir, name, "tern-worker", a, env);
}

static void test_duplicate_id(void)
{
    struct svc_proc sched = {0}, a = {0}, b = {0};
    const char *sa[] = {"--gateway-endpoint", gw_ep, "--worker-endpoint", wk_ep,
                        "--heartbeat-ms", HB, "--dead-after-ms", DEAD, NULL};
    CHECK_EQ_INT(svc_spawn(&sched, dir, "scheduler", "tern-scheduler", sa), 0);
    CHECK_EQ_INT(start_worker(&a, "wa", "gpu-host-0", wk_ep, NULL), 0);
    CHECK(wait_log(&a, "ev=registered", 10000, NULL));
    struct notify nb;
    notify_open(&nb, "wb");
    CHECK_EQ_INT(start_worker(&b, "wb", "gpu-host-0", wk_ep, &nb), 0);
    CHECK(wait_log(&b, "ev=register_refused", 10000, &nb));
    /* a few seconds of both alive: refused again and again, never a flap */
    for (int i = 0; i < 40; i++) {
        notify_poll(&nb);
        usleep(100 * 1000);
    }
    CHECK(count(&b, "ev=register_refused") >= 2);
    CHECK(count(&b, "--worker-id") >= 1);
    CHECK_EQ_INT(count(&b, "ev=registered "), 0);
    CHECK(!nb.ready); /* systemd would still show it "activating" */
    CHECK(nb.status || nb.fd < 0);
    CHECK(count(&sched, "ev=register_refused") >= 2);
    CHECK(count(&sched, "duplicate worker id") >= 1);
    CHECK_EQ_INT(count(&sched, "why=replaced"), 0);
    CHECK_EQ_INT(count(&sched, "ev=worker_lost"), 0);
    CHECK_EQ_INT(count(&a, "ev=registered "), 1);
    CHECK_EQ_INT(count(&a, "ev=reset"), 0);
    /* the holder dies: the other takes the id, then READY=1 */
    svc_stop(&a, SIGKILL, 2000);
    CHECK(wait_log(&b, "ev=registered ", 10000, &nb));
    for (int i = 0; i < 10 && !nb.ready; i++) {
        usleep(50 * 1000);
        notify_poll(&nb);
    }
    CHECK(nb.ready || nb.fd < 0 || !nb.status);
    if (test_failures_) {
        svc_dump_log(&sched);
        svc_dump_log(&b);
    }
    svc_stop(&b, SIGTERM, 5000);
    svc_stop(&sched, SIGTERM, 5000);
    if (nb.fd >= 0)
        close(nb.fd);
}

static void test_no_scheduler(void)
{
    char ep[160];
    snprintf(ep, sizeof ep, "ipc://%s/nobody.sock", dir);
    struct notify n;
    notify_open(&n, "lonely");
    struct svc_proc w = {0};
    CHECK_EQ_INT(start_worker(&w, "lonely", "", ep, &n), 0);
    CHECK(wait_log(&w, "ev=register_waiting", 12000, &n));
    CHECK(count(&w, "no answer from the scheduler at ipc://") >= 1);
    char host[40] = "";
    gethostname(host, sizeof host - 1);
    char want[80];
    snprintf(want, sizeof want, "worker=%s-", host); /* the default id: host name + pid */
    CHECK(count(&w, want) >= 1);
    notify_poll(&n);
    CHECK(!n.ready);
    if (n.status)
        CHECK(strstr(n.last_status, "not registered") != NULL);
    if (test_failures_)
        svc_dump_log(&w);
    svc_stop(&w, SIGTERM, 5000);
    if (n.fd >= 0)
        close(n.fd);
}

int main(void)
{
    CHECK_EQ_INT(svc_tmpdir(dir, sizeof dir), 0);
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", dir);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/wk.sock", dir);
    test_duplicate_id();
    test_no_scheduler();
    return test_result();
}
