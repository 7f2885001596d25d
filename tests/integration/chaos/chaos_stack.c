/* chaos_stack: spawn, kill and restart the three tern processes of a loopback stack. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos.h"
#include "itest.h"

uint32_t chaos_fake_next(uint32_t prev)
{
    return (uint32_t)(((uint64_t)prev * 31 + 7) % CHAOS_VOCAB);
}

static pid_t spawn(const struct chaos_stack *s, const char *bin, char *const args[],
                   const char *logname)
{
    char path[1024], log[256];
    const char *bd = getenv("TERN_BUILD_DIR");
    snprintf(path, sizeof(path), "%s/bin/%s", bd ? bd : "build", bin);
    snprintf(log, sizeof(log), "%s/%s.log", s->dir, logname);
    char *argv[40];
    int n = 0;
    argv[n++] = path;
    for (int i = 0; args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return itest_spawn(argv, NULL, log);
}

pid_t chaos_start_sched(struct chaos_stack *s)
{
    char *a[] = {"--gateway-endpoint", s->gw_ep, "--worker-endpoint", s->wk_ep, "--heartbeat-ms",
                 "100", "--dead-after-ms", "600", "--queue-cap", "1024", NULL};
    s->sched = spawn(s, "tern-scheduler", a, "scheduler");
    return s->sched;
}

pid_t chaos_start_worker(struct chaos_stack *s)
{
    char vocab[16], step[16], seqs[16];
    snprintf(vocab, sizeof(vocab), "%d", CHAOS_VOCAB);
    snprintf(step, sizeof(step), "%d", s->step_us);
    snprintf(seqs, sizeof(seqs), "%d", s->max_seqs);
    char *a[] = {"--scheduler-endpoint", s->wk_ep, "--engine", "fake", "--fake-vocab", vocab,
                 "--fake-step-us", step, "--max-model-len", "1024", "--heartbeat-ms", "100",
                 "--dead-after-ms", "600", "--max-seqs", seqs, NULL};
    s->worker = spawn(s, "tern-worker", a, "worker");
    return s->worker;
}

pid_t chaos_start_gateway(struct chaos_stack *s)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", s->port);
    char *a[] = {"--port", port, "--scheduler-endpoint", s->gw_ep, "--sched-dead-ms", "800",
                 "--drain-ms", "2000", NULL};
    s->gw = spawn(s, "tern-gateway", a, "gateway");
    return s->gw;
}

int chaos_stack_start(struct chaos_stack *s, int step_us, int max_seqs)
{
    memset(s, 0, sizeof(*s));
    s->step_us = step_us;
    s->max_seqs = max_seqs;
    snprintf(s->dir, sizeof(s->dir), "/tmp/tern-chaos-XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    snprintf(s->gw_ep, sizeof(s->gw_ep), "ipc://%s/gw.sock", s->dir);
    snprintf(s->wk_ep, sizeof(s->wk_ep), "ipc://%s/wk.sock", s->dir);
    s->port = itest_free_port();
    chaos_start_sched(s);
    chaos_start_worker(s);
    chaos_start_gateway(s);
    return itest_wait_status(s->port, "/health", 200, 20000) ? 0 : -1;
}

void chaos_kill9(pid_t *pid)
{
    if (*pid <= 0)
        return;
    itest_kill(*pid, SIGKILL);
    itest_wait(*pid, 5000);
    *pid = 0;
}

void chaos_stack_stop(struct chaos_stack *s)
{
    pid_t *all[3] = {&s->gw, &s->worker, &s->sched};
    for (int i = 0; i < 3; i++)
        if (*all[i] > 0) {
            itest_kill(*all[i], SIGTERM);
            if (itest_wait(*all[i], 5000) < 0) {
                fprintf(stderr, "pid %d ignored SIGTERM for 5 s\n", (int)*all[i]);
                chaos_kill9(all[i]);
            }
            *all[i] = 0;
        }
}

int chaos_orphans(const struct chaos_stack *s)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], buf[4096];
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t k = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        for (size_t i = 0; i < k; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[k] = '\0';
        if (strstr(buf, s->dir)) {
            fprintf(stderr, "orphan: pid %s: %s\n", e->d_name, buf);
            n++;
        }
    }
    closedir(d);
    return n;
}

long chaos_rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long kb = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

void chaos_dump_log(const struct chaos_stack *s, const char *name)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "tail -n 25 %s/%s.log >&2", s->dir, name);
    if (system(cmd) != 0)
        fprintf(stderr, "(no log %s)\n", name);
}

void chaos_stack_rmdir(struct chaos_stack *s)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", s->dir);
}
