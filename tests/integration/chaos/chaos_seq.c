/* chaos_seq: the prompts and expected texts of the load. The fake engine continues prompt [p]
 * with f(p), f(f(p)), ... (f = chaos_fake_next); prompts are chosen so that the whole sequence
 * stays in ordinary tokens. The expected text is computed from three paths: /detokenize of the
 * independently computed ids, a quiet non-streamed completion with the load's body, and the same
 * with CHAOS_TAIL_SEED (so the load's body is proof against sampling's rare tail draws); they
 * must agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chaos.h"
#include "chaos_seq.h"
#include "itest.h"

static char *post_field(int port, const char *path, const char *body, const char *field)
{
    struct itest_resp r;
    char *out = NULL;
    if (itest_http(port, "POST", path, "Content-Type: application/json\r\n", body, &r, 10000) &&
        r.status == 200) {
        cJSON *j = cJSON_Parse(r.body);
        cJSON *it = NULL;
        if (j && strcmp(field, "prompt") == 0)
            it = cJSON_GetObjectItemCaseSensitive(j, "prompt");
        else if (j)
            it = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0), "text");
        if (it && cJSON_IsString(it))
            out = strdup(it->valuestring);
        cJSON_Delete(j);
    } else {
        fprintf(stderr, "%s: status %d %.200s\n", path, r.status, r.body ? r.body : "");
    }
    itest_resp_free(&r);
    return out;
}

int chaos_seq_make(int port, int n, int max_tokens, uint32_t *prompts, char **expected)
{
    uint32_t p = 1000;
    for (int k = 0; k < n; k++) {
        /* next start whose whole continuation is ordinary, printable-ish tokens */
        for (;; p += 97) {
            uint32_t t = p;
            bool ok = true;
            for (int i = 0; i < max_tokens && ok; i++) {
                t = chaos_fake_next(t);
                ok = t >= 256 && t < CHAOS_PLAIN_MAX; /* skip the single-byte tokens too */
            }
            if (ok)
                break;
        }
        prompts[k] = p;
        size_t cap = (size_t)max_tokens * 12 + 256; /* the ids, or load_body's */
        char *body = malloc(cap);
        size_t len = (size_t)snprintf(body, cap, "{\"tokens\":[");
        uint32_t t = p;
        for (int i = 0; i < max_tokens; i++) {
            t = chaos_fake_next(t);
            len += (size_t)snprintf(body + len, cap - len, "%s%u", i ? "," : "", t);
        }
        snprintf(body + len, cap - len, "]}");
        char *via_ids = post_field(port, "/detokenize", body, "prompt");
        load_body(body, cap, p, max_tokens, false, -1);
        char *via_gen = post_field(port, "/v1/completions", body, "text");
        /* the load's request must not depend on the draws: one whose seed draws a tail token */
        load_body(body, cap, p, max_tokens, false, CHAOS_TAIL_SEED);
        char *via_tail = post_field(port, "/v1/completions", body, "text");
        free(body);
        if (!via_ids || !via_gen || !via_tail || strcmp(via_ids, via_gen) != 0 ||
            strcmp(via_ids, via_tail) != 0) {
            fprintf(stderr,
                    "prompt %u: /detokenize \"%.200s\" != completion \"%.200s\" or seeded "
                    "\"%.200s\"\n",
                    p, via_ids ? via_ids : "(none)", via_gen ? via_gen : "(none)",
                    via_tail ? via_tail : "(none)");
            free(via_ids);
            free(via_gen);
            free(via_tail);
            return -1;
        }
        free(via_gen);
        free(via_tail);
        expected[k] = via_ids;
        p += 97;
    }
    return 0;
}
