/* test_soak: 32 streaming clients for 60 s (--long: 600 s; --seconds N) against the stack with
 * the fake worker at 20 ms a step. No faults, so every stream must complete with its whole
 * known text (0 lost or duplicated tokens, 0 errors, 0 hung); the gateway's RSS may grow less
 * than 5 % from the end of the warm-up (a fifth of the run, at least 10 s) to the end, and its
 * open fds must be back to the warm-up count (+-10) once the clients are idle. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos.h"
#include "chaos_seq.h"
#include "itest.h"
#include "test.h"

#define N_CLIENTS 32
#define MAX_TOKENS 48
#define N_PROMPTS 8

static int count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    int seconds = 60;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--long") == 0)
            seconds = 600;
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atoi(argv[++i]);
    }
    struct chaos_stack s;
    if (chaos_stack_start(&s, 20000, N_CLIENTS) < 0) {
        chaos_dump_log(&s, "gateway");
        chaos_stack_stop(&s);
        fprintf(stderr, "cannot start the stack\n");
        return 1;
    }
    uint32_t prompts[N_PROMPTS];
    char *expected[N_PROMPTS] = {0};
    int rc = chaos_seq_make(s.port, N_PROMPTS, MAX_TOKENS, prompts, expected);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        chaos_stack_stop(&s);
        chaos_stack_rmdir(&s);
        return test_result();
    }
    struct load *l = load_create(s.port, N_CLIENTS, MAX_TOKENS, prompts, expected, N_PROMPTS);
    int warm_s = seconds / 5 < 10 ? 10 : seconds / 5;
    load_run(l, warm_s * 1000);
    long rss_warm = chaos_rss_kb(s.gw);
    long rss_peak = rss_warm;
    long sched_warm = chaos_rss_kb(s.sched), worker_warm = chaos_rss_kb(s.worker);
    /* the warm-up fd count, with the clients idle */
    load_pause(l, true);
    while (load_inflight(l) > 0)
        load_run(l, 50);
    itest_sleep_ms(200);
    int fds_warm = count_fds(s.gw);
    load_pause(l, false);
    for (int t = warm_s; t < seconds; t++) {
        load_run(l, 1000);
        long r = chaos_rss_kb(s.gw);
        if (r > rss_peak)
            rss_peak = r;
    }
    load_pause(l, true);
    long long end = itest_now_ms() + 10000;
    while (load_inflight(l) > 0 && itest_now_ms() < end)
        load_run(l, 50);
    itest_sleep_ms(200);
    long rss_end = chaos_rss_kb(s.gw);
    int fds_end = count_fds(s.gw);
    struct load_stats st;
    load_stats_get(l, &st);
    double growth = rss_warm > 0 ? 100.0 * (double)(rss_end - rss_warm) / (double)rss_warm : 0;
    fprintf(stderr,
            "soak: %d s, %d streams; started=%ld completed=%ld errored=%ld wrong_text=%ld "
            "hung=%ld; gateway RSS warm=%ld KiB end=%ld KiB peak=%ld KiB growth=%.2f%%; fds "
            "warm=%d end=%d; scheduler RSS %ld->%ld KiB, worker RSS %ld->%ld KiB\n",
            seconds, N_CLIENTS, st.started, st.completed, st.errored, st.wrong_text, st.hung,
            rss_warm, rss_end, rss_peak, growth, fds_warm, fds_end, sched_warm,
            chaos_rss_kb(s.sched), worker_warm, chaos_rss_kb(s.worker));
    CHECK_EQ_INT(st.wrong_text, 0);
    CHECK_EQ_INT(st.errored, 0);
    CHECK_EQ_INT(st.hung, 0);
    CHECK_EQ_INT(st.refused, 0);
    CHECK_EQ_INT(load_inflight(l), 0);
    CHECK(st.completed >= (long)N_CLIENTS * (seconds / 6)); /* ~3 s a stream measured */
    CHECK(growth < 5.0);
    CHECK(fds_end >= 0 && abs(fds_end - fds_warm) <= 10);
    if (test_result() != 0)
        chaos_dump_log(&s, "gateway");
    load_destroy(l);
    for (int i = 0; i < N_PROMPTS; i++)
        free(expected[i]);
    chaos_stack_stop(&s);
    CHECK_EQ_INT(chaos_orphans(&s), 0);
    chaos_stack_rmdir(&s);
    return test_result();
}
