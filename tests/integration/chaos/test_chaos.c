/* test_chaos: kill -9 under load. 32 streaming clients against the stack (fake worker at a
 * realistic rate: 20 ms a step = 50 tokens/s a stream); each round kills the worker, then the
 * scheduler, then the gateway, and restarts each. Checks (docs/RELIABILITY.md "Kills under load"):
 *   - every stream that had tokens when the worker or the gateway was killed ends (error event,
 *     reset or completion) within 2 s of the kill; one in flight when the scheduler was killed
 *     waits for the new scheduler (the gateway parks it, --sched-resume-ms) and ends within 5 s
 *     of /health 200 after the restart (its remaining tokens queue behind the new load),
 *     completed with the right text; no stream stalls 15 s (hung);
 *   - worker kill: /health 503 within 1 s; after its restart /health 200 within 5 s (the same
 *     5 s bound after a scheduler or gateway restart);
 *   - every completed stream has each token exactly once (whole text == the known text);
 *   - no process of the stack is left after the stop.
 * Usage: test_chaos [--kills N] (default 8 per component; the figure is 20). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos.h"
#include "chaos_seq.h"
#include "itest.h"
#include "test.h"

#define N_CLIENTS 32
#define MAX_TOKENS 32
#define N_PROMPTS 8

static struct chaos_stack g_s;
static struct load *g_load;

static int health(void)
{
    struct itest_resp r;
    int st = itest_http(g_s.port, "GET", "/health", NULL, NULL, &r, 500) ? r.status : 0;
    itest_resp_free(&r);
    return st;
}

/* run the load until /health answers want (or timeout); ms it took, -1 on timeout */
static long long wait_health(int want, int timeout_ms, long long since)
{
    long long end = itest_now_ms() + timeout_ms;
    while (itest_now_ms() < end) {
        if (health() == want)
            return itest_now_ms() - since;
        load_run(g_load, 20);
    }
    return -1;
}

/* run the load until the streams marked at the kill have ended (or timeout) */
static void wait_marked(int timeout_ms)
{
    long long end = itest_now_ms() + timeout_ms;
    while (load_marked_open(g_load) > 0 && itest_now_ms() < end)
        load_run(g_load, 20);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    int kills = 8;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--kills") == 0)
            kills = atoi(argv[i + 1]);
    if (chaos_stack_start(&g_s, 20000, N_CLIENTS) < 0) {
        chaos_dump_log(&g_s, "scheduler");
        chaos_dump_log(&g_s, "worker");
        chaos_dump_log(&g_s, "gateway");
        chaos_stack_stop(&g_s);
        fprintf(stderr, "cannot start the stack\n");
        return 1;
    }
    uint32_t prompts[N_PROMPTS];
    char *expected[N_PROMPTS] = {0};
    int rc = chaos_seq_make(g_s.port, N_PROMPTS, MAX_TOKENS, prompts, expected);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        chaos_stack_stop(&g_s);
        chaos_stack_rmdir(&g_s);
        return test_result();
    }
    g_load = load_create(g_s.port, N_CLIENTS, MAX_TOKENS, prompts, expected, N_PROMPTS);
    load_run(g_load, 2000);

    static const char *const names[3] = {"worker", "scheduler", "gateway"};
    long long worst_503 = 0, worst_200[3] = {0, 0, 0};
    int done_kills[3] = {0, 0, 0};
    long long t_start = itest_now_ms();
    for (int round = 0; round < kills; round++) {
        for (int comp = 0; comp < 3; comp++) {
            load_run(g_load, 2500); /* streams flowing: some complete, most have tokens */
            pid_t *pid = comp == 0 ? &g_s.worker : comp == 1 ? &g_s.sched : &g_s.gw;
            chaos_kill9(pid);
            long long t_kill = itest_now_ms();
            load_mark_kill(g_load);
            done_kills[comp]++;
            if (comp == 0) {
                long long d = wait_health(503, 3000, t_kill);
                if (d < 0 || d > 1000)
                    fprintf(stderr, "worker kill %d: /health 503 after %lld ms\n", round, d);
                CHECK(d >= 0 && d <= 1000);
                if (d > worst_503 || d < 0)
                    worst_503 = d < 0 ? 99999 : d;
            }
            if (comp != 1) /* the scheduler's streams wait for the restart */
                wait_marked(4000);
            if (comp == 0)
                chaos_start_worker(&g_s);
            else if (comp == 1)
                chaos_start_sched(&g_s);
            else
                chaos_start_gateway(&g_s);
            long long t_restart = itest_now_ms();
            long long d = wait_health(200, 8000, t_restart);
            if (d < 0 || d > 5000)
                fprintf(stderr, "%s restart %d: /health 200 after %lld ms\n", names[comp], round,
                        d);
            CHECK(d >= 0 && d <= 5000);
            if (d > worst_200[comp] || d < 0)
                worst_200[comp] = d < 0 ? 99999 : d;
            if (comp == 1) { /* the parked streams go on now: they must end within 2 s */
                load_mark_restart(g_load, 5000);
                wait_marked(7000);
            }
        }
    }
    long long chaos_ms = itest_now_ms() - t_start;
    /* let the last streams finish */
    load_pause(g_load, true);
    long long end = itest_now_ms() + 10000;
    while (load_inflight(g_load) > 0 && itest_now_ms() < end)
        load_run(g_load, 50);
    CHECK_EQ_INT(load_inflight(g_load), 0);
    struct load_stats st;
    load_stats_get(g_load, &st);
    fprintf(stderr,
            "chaos: kills worker=%d scheduler=%d gateway=%d in %lld ms; streams started=%ld "
            "completed=%ld errored=%ld (503 %ld, error event %ld, reset %ld) refused=%ld "
            "wrong_text=%ld hung=%ld; in flight at kills=%ld "
            "max end after kill=%lld ms late=%ld; worker kill -> /health 503 worst %lld ms; "
            "restart -> /health 200 worst worker=%lld scheduler=%lld gateway=%lld ms\n",
            done_kills[0], done_kills[1], done_kills[2], chaos_ms, st.started, st.completed,
            st.errored, st.err_status, st.err_event, st.err_closed, st.refused, st.wrong_text, st.hung, st.marked, st.max_end_after_kill_ms,
            st.marked_late, worst_503, worst_200[0], worst_200[1], worst_200[2]);
    CHECK_EQ_INT(st.wrong_text, 0);
    CHECK_EQ_INT(st.hung, 0);
    CHECK_EQ_INT(st.marked_late, 0);
    CHECK(st.completed > 0);
    CHECK(st.marked > 0);
    /* a normal request still works */
    CHECK_EQ_INT(health(), 200);
    if (test_result() != 0) {
        chaos_dump_log(&g_s, "gateway");
        chaos_dump_log(&g_s, "scheduler");
        chaos_dump_log(&g_s, "worker");
    }
    load_destroy(g_load);
    for (int i = 0; i < N_PROMPTS; i++)
        free(expected[i]);
    chaos_stack_stop(&g_s);
    int orphans = chaos_orphans(&g_s);
    CHECK_EQ_INT(orphans, 0);
    chaos_stack_rmdir(&g_s);
    return test_result();
}
