/* test_ops_units: the three systemd units in deploy/systemd, installed into a temp dir with
 * ExecStart rewritten to the built binaries, pass `systemd-analyze verify` with no output at
 * all (a broken unit, checked first, proves the tool reports problems); every $TERN_*_ARGS an
 * ExecStart uses and every EnvironmentFile is documented by an example in deploy/env/.
 * Exit 77 when systemd-analyze is absent. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file.h"
#include "test.h"

static char g_dir[64];

static const char *const units[] = {"tern-scheduler.service", "tern-gateway.service",
                                    "tern-worker@.service"};

/* Copy src to dst replacing every "/usr/local/bin/" by bindir + "/". */
static int install_unit(const char *src, const char *dst, const char *bindir)
{
    char *text = file_read(src, NULL);
    FILE *out = fopen(dst, "w");
    if (!text || !out) {
        free(text);
        if (out)
            fclose(out);
        return -1;
    }
    const char *from = "/usr/local/bin/";
    const char *p = text, *q;
    while ((q = strstr(p, from)) != NULL) {
        fwrite(p, 1, (size_t)(q - p), out);
        fprintf(out, "%s/", bindir);
        p = q + strlen(from);
    }
    fputs(p, out);
    fclose(out);
    free(text);
    return 0;
}

/* Run cmd, put its combined output in out; returns the exit code. */
static int run(const char *cmd, char *out, size_t n)
{
    char full[4096], log[128];
    snprintf(log, sizeof log, "%s/out.txt", g_dir);
    snprintf(full, sizeof full, "%s > '%s' 2>&1", cmd, log);
    int st = system(full);
    char *text = file_read(log, NULL);
    snprintf(out, n, "%s", text ? text : "");
    free(text);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int verify(const char *files, char *out, size_t n)
{
    char cmd[2048];
    /* SYSTEMD_LOG_LEVEL=notice: warnings and errors, not the tool's own debug chatter */
    snprintf(cmd, sizeof cmd,
             "SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "
             "--generators=no %s",
             files);
    return run(cmd, out, n);
}

/* Every "$TERN_..._ARGS" in the unit must be a documented variable in one of its env files. */
static void check_env_docs(const char *unit_text, const char *unit, const char *src)
{
    const char *p = unit_text;
    while ((p = strstr(p, "EnvironmentFile=")) != NULL) {
        p += strlen("EnvironmentFile=");
        if (*p == '-')
            p++;
        const char *name = strrchr(p, '/');
        const char *eol = strchr(p, '\n');
        if (!name || (eol && name > eol))
            continue;
        char file[128], path[512];
        snprintf(file, sizeof file, "%.*s", (int)((eol ? eol : name + strlen(name)) - name - 1),
                 name + 1);
        snprintf(path, sizeof path, "%s/deploy/env/%s", src, file);
        bool ok = access(path, R_OK) == 0;
        if (!ok)
            fprintf(stderr, "%s: EnvironmentFile %s has no example at %s\n", unit, file, path);
        CHECK(ok);
    }
    const char *ex = strstr(unit_text, "ExecStart=");
    CHECK(ex != NULL);
    const char *var = ex ? strstr(ex, "$TERN_") : NULL;
    if (!var)
        return;
    char name[64];
    size_t k = 0;
    for (const char *c = var + 1; k + 1 < sizeof name && (*c == '_' || (*c >= 'A' && *c <= 'Z'));
         c++)
        name[k++] = *c;
    name[k] = '\0';
    /* the variable is set (as NAME=) in some example env file */
    char cmd[1024], out[256];
    snprintf(cmd, sizeof cmd, "grep -lqs '^#\\? *%s=' '%s'/deploy/env/*.env", name, src);
    int rc = run(cmd, out, sizeof out);
    if (rc != 0)
        fprintf(stderr, "%s: %s is not documented in deploy/env/*.env\n", unit, name);
    CHECK_EQ_INT(rc, 0);
}

int main(void)
{
    if (system("command -v systemd-analyze > /dev/null 2>&1") != 0)
        TEST_SKIP("systemd-analyze not installed");
    const char *src = getenv("TERN_SOURCE_DIR");
    const char *bd = getenv("TERN_BUILD_DIR");
    if (!src || !bd)
        TEST_SKIP("TERN_SOURCE_DIR / TERN_BUILD_DIR not set (run through ctest)");
    snprintf(g_dir, sizeof g_dir, "/tmp/tern-ops-units-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    char bindir[512], out[8192];
    snprintf(bindir, sizeof bindir, "%s/bin", bd);

    /* the tool reports a bad unit (so "no output" below means something) */
    char bad[256];
    snprintf(bad, sizeof bad, "%s/tern-bad.service", g_dir);
    FILE *f = fopen(bad, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("[Service]\nType=notify\nExecStart=/nonexistent/tern-x\nWatchdogSecc=5\n", f);
        fclose(f);
    }
    int rc = verify(bad, out, sizeof out);
    CHECK(rc != 0 || out[0] != '\0');
    CHECK(strstr(out, "tern-bad.service") != NULL);

    /* install the three units; the template is verified through instance 0 too */
    char files[2048] = "";
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        char from[512], to[512];
        snprintf(from, sizeof from, "%s/deploy/systemd/%s", src, units[i]);
        snprintf(to, sizeof to, "%s/%s", g_dir, units[i]);
        CHECK_EQ_INT(install_unit(from, to, bindir), 0);
        char *text = file_read(from, NULL);
        CHECK(text != NULL);
        if (text) {
            CHECK(strstr(text, "Type=notify") != NULL);
            CHECK(strstr(text, "WatchdogSec=") != NULL);
            CHECK(strstr(text, "NoNewPrivileges=yes") != NULL);
            check_env_docs(text, units[i], src);
            free(text);
        }
        size_t len = strlen(files);
        snprintf(files + len, sizeof files - len, " '%s'", to);
    }
    char inst[512];
    snprintf(inst, sizeof inst, "%s/tern-worker@0.service", g_dir);
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/tern-worker@.service", g_dir);
    CHECK_EQ_INT(link(tmpl, inst), 0);
    size_t len = strlen(files);
    snprintf(files + len, sizeof files - len, " '%s'", inst);

    rc = verify(files, out, sizeof out);
    if (rc != 0 || out[0])
        fprintf(stderr, "systemd-analyze verify rc=%d:\n%s\n", rc, out);
    CHECK_EQ_INT(rc, 0);
    CHECK_STREQ(out, "");

    /* the exposure score, for the report (informational: it depends on the systemd version) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "systemd-analyze security --offline=yes --no-pager '%s' | tail -1",
             inst);
    if (run(cmd, out, sizeof out) == 0)
        fprintf(stderr, "worker@0 %s", out);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (test_result() == 0 && system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", g_dir);
    return test_result();
}
