/* Parity with Python jinja2: ref_render.py renders every chat case (cases/NAME.json) with every
 * template (templates/NAME.jinja) and every small construct (constructs.json) using jinja2 set up
 * as Hugging Face does; this test renders the same with text/jinja + text/chat and requires
 * byte-identical output, or a failure where jinja2 fails (with raise_exception's message).
 * Skipped (77) when /usr/bin/python3 has no jinja2. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "test.h"
#include "text/chat.h"
#include "text/jinja.h"

#define DIR "tests/unit/jinja"

static void show_diff(const char *key, const char *exp, const char *got, size_t got_len)
{
    size_t el = strlen(exp), i = 0;
    while (i < el && i < got_len && exp[i] == got[i])
        i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "MISMATCH %s at byte %zu (expected %zu bytes, got %zu)\n", key, i, el, got_len);
    fprintf(stderr, "  expected: %.*s\n", (int)(el - from < 100 ? el - from : 100), exp + from);
    fprintf(stderr, "  got:      %.*s\n", (int)(got_len - from < 100 ? got_len - from : 100),
            got + from);
}

/* Compare one outcome: rc/out/err from us against the reference entry. Returns true when equal. */
static bool check_outcome(const char *key, const cJSON *ref, int rc, const char *out,
                          size_t out_len, const struct jinja_error *err)
{
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(ref, "ok");
    if (cJSON_IsTrue(ok)) {
        const char *exp = cJSON_GetObjectItemCaseSensitive(ref, "out")->valuestring;
        if (rc != 0) {
            fprintf(stderr, "MISMATCH %s: jinja2 rendered, we failed: %s\n", key, err->msg);
            return false;
        }
        if (strlen(exp) != out_len || memcmp(exp, out, out_len) != 0) {
            show_diff(key, exp, out, out_len);
            return false;
        }
        return true;
    }
    const char *type = cJSON_GetObjectItemCaseSensitive(ref, "type")->valuestring;
    const char *msg = cJSON_GetObjectItemCaseSensitive(ref, "msg")->valuestring;
    if (rc == 0) {
        fprintf(stderr, "MISMATCH %s: jinja2 failed (%s: %s), we rendered\n", key, type, msg);
        return false;
    }
    if (!strcmp(type, "TemplateError") && !strstr(err->msg, msg)) {
        fprintf(stderr, "MISMATCH %s: raise_exception message '%s' not in '%s'\n", key, msg,
                err->msg);
        return false;
    }
    return true;
}

static bool run_construct(const char *key, const cJSON *ref)
{
    const char *tpl = cJSON_GetObjectItemCaseSensitive(ref, "template")->valuestring;
    const char *vars = cJSON_GetObjectItemCaseSensitive(ref, "vars_json")->valuestring;
    struct jinja_error err;
    char *out = NULL;
    size_t out_len = 0;
    int rc;
    struct jinja_template *t = jinja_template_create(tpl, strlen(tpl), &err);
    if (!t) {
        rc = -1;
    } else {
        struct jinja_ctx *c = jinja_ctx_create();
        rc = jinja_ctx_merge_json(c, vars, strlen(vars), &err);
        CHECK_EQ_INT(rc, 0);
        if (rc == 0)
            rc = jinja_template_render(t, c, &out, &out_len, &err);
        jinja_ctx_destroy(c);
    }
    bool same = check_outcome(key, ref, rc, out, out_len, &err);
    free(out);
    jinja_template_destroy(t);
    return same;
}

static bool run_case(const char *key, const cJSON *ref)
{
    char casef[256], tplf[256], path[600];
    const char *bar = strchr(key, '|');
    snprintf(casef, sizeof(casef), "%.*s", (int)(bar - key), key);
    snprintf(tplf, sizeof(tplf), "%s", bar + 1);
    size_t tl, rl;
    snprintf(path, sizeof(path), DIR "/templates/%s", tplf);
    char *tsrc = file_read(path, &tl);
    snprintf(path, sizeof(path), DIR "/cases/%s", casef);
    char *req = file_read(path, &rl);
    CHECK(tsrc && req);
    struct jinja_error err;
    struct chat_template *t = tsrc ? chat_template_create(tsrc, tl, &err) : NULL;
    CHECK(t != NULL);
    char *out = NULL;
    size_t out_len = 0;
    int rc = -1;
    if (t && req)
        rc = chat_template_render(t, req, rl, NULL, &out, &out_len, &err);
    bool same = check_outcome(key, ref, rc, out, out_len, &err);
    free(out);
    chat_template_destroy(t);
    free(tsrc);
    free(req);
    return same;
}

/* The CLI (tern chat-template) prints the same bytes as the library for one case. */
static void check_cli(const cJSON *ref)
{
    const char *key = "03_tools_call_result.json|qwen3.5.jinja";
    const char *build = getenv("TERN_BUILD_DIR");
    char tern[1024], cmd[2048];
    snprintf(tern, sizeof(tern), "%s/bin/tern", build ? build : "build");
    if (access(tern, X_OK) != 0) {
        fprintf(stderr, "note: %s not built, CLI check skipped\n", tern);
        return;
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(ref, key);
    CHECK(e != NULL);
    if (!e)
        return;
    const char *exp = cJSON_GetObjectItemCaseSensitive(e, "out")->valuestring;
    snprintf(cmd, sizeof(cmd),
             "%s chat-template --template " DIR "/templates/qwen3.5.jinja < " DIR
             "/cases/03_tools_call_result.json",
             tern);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p)
        return;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, p);
    buf[n] = 0;
    CHECK_EQ_INT(pclose(p), 0);
    CHECK(n == strlen(exp) && memcmp(buf, exp, n) == 0);
}

int main(void)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    if (src && chdir(src) != 0)
        TEST_SKIP("cannot chdir to TERN_SOURCE_DIR");
    if (system("/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1") != 0)
        TEST_SKIP("/usr/bin/python3 with jinja2 (Debian python3-jinja2) not available");
    char out_path[] = "/tmp/tern_jinja_ref_XXXXXX";
    int fd = mkstemp(out_path);
    CHECK(fd >= 0);
    if (fd < 0)
        return test_result();
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "cd " DIR " && /usr/bin/python3 ref_render.py %s --templates templates/*.jinja "
             "--cases cases/*.json --constructs constructs.json --fuzz 300 20261129",
             out_path);
    int rc = system(cmd);
    CHECK_EQ_INT(rc, 0);
    size_t len = 0;
    char *json = file_read(out_path, &len);
    unlink(out_path);
    CHECK(json != NULL);
    cJSON *ref = json ? cJSON_Parse(json) : NULL;
    CHECK(ref != NULL);
    int n_case = 0, n_cons = 0, n_bad = 0, n_err = 0;
    for (const cJSON *e = ref ? ref->child : NULL; e; e = e->next) {
        bool same;
        if (!strncmp(e->string, "construct:", 10)) {
            same = run_construct(e->string, e);
            n_cons++;
        } else {
            same = run_case(e->string, e);
            n_case++;
        }
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "ok")))
            n_err++;
        if (!same)
            n_bad++;
    }
    if (ref)
        check_cli(ref);
    CHECK_EQ_INT(n_bad, 0);
    CHECK(n_case >= 60 && n_cons >= 680);
    printf("jinja parity: %d chat renders (case x template), %d constructs, %d expected errors, "
           "%d mismatches\n",
           n_case, n_cons, n_err, n_bad);
    cJSON_Delete(ref);
    free(json);
    return test_result();
}
