/* gw_lps: completion-token logprobs kept per choice and written as OpenAI JSON (gw_lps.h).
 * Token texts are the raw token bytes with invalid UTF-8 (a token that splits a character)
 * shown as U+FFFD, as vLLM shows them. */
#include "gw_lps.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "gw_text.h"
#include "proto/tern.pb-c.h"
#include "text/tokenizer.h"

void gw_lps_add(struct gw_lps *l, const uint32_t *ids, size_t n,
                struct Tern__TokenLogprob *const *lps, size_t n_lps, int top_max)
{
    for (size_t i = 0; i < n; i++) {
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 64;
            l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
        }
        struct gw_lps_entry *e = &l->v[l->n++];
        memset(e, 0, sizeof(*e));
        e->id = (int32_t)ids[i];
        const Tern__TokenLogprob *lp = i < n_lps ? lps[i] : NULL;
        if (!lp)
            continue; /* the worker sent none: logprob 0, no alternatives */
        e->logprob = lp->logprob;
        size_t k_max = lp->n_top_ids < lp->n_top_logprobs ? lp->n_top_ids : lp->n_top_logprobs;
        if (k_max > (size_t)top_max)
            k_max = top_max > 0 ? (size_t)top_max : 0;
        for (size_t k = 0; k < k_max; k++) {
            e->top_ids[k] = (int32_t)lp->top_ids[k];
            e->top_lps[k] = lp->top_logprobs[k];
        }
        e->n_top = (int)k_max;
    }
}

void gw_lps_deinit(struct gw_lps *l)
{
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* the token's text (invalid UTF-8 of a partial byte token becomes U+FFFD) and its raw bytes */
static void token_text(const struct gw_text *text, int32_t id, char *out, size_t cap, cJSON **bytes)
{
    size_t n = 0;
    const char *b = tokenizer_id_to_bytes(gw_text_tokenizer(text), id, &n);
    if (!b)
        n = 0;
    if (n * 3 + 1 > cap)
        n = (cap - 1) / 3;
    size_t w = tokenizer_utf8_repair(b ? b : "", n, true, out, NULL);
    out[w] = '\0';
    if (bytes) {
        *bytes = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(*bytes, cJSON_CreateNumber((unsigned char)b[i]));
    }
}

cJSON *gw_lps_chat_json(const struct gw_lps *l, const struct gw_text *text, size_t from, size_t to)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "content");
    char tok[256];
    for (size_t i = from; i < to; i++) {
        const struct gw_lps_entry *e = &l->v[i];
        cJSON *o = cJSON_CreateObject();
        cJSON *bytes;
        token_text(text, e->id, tok, sizeof(tok), &bytes);
        cJSON_AddStringToObject(o, "token", tok);
        cJSON_AddNumberToObject(o, "logprob", e->logprob);
        cJSON_AddItemToObject(o, "bytes", bytes);
        cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs");
        for (int k = 0; k < e->n_top; k++) {
            cJSON *t = cJSON_CreateObject();
            token_text(text, e->top_ids[k], tok, sizeof(tok), &bytes);
            cJSON_AddStringToObject(t, "token", tok);
            cJSON_AddNumberToObject(t, "logprob", e->top_lps[k]);
            cJSON_AddItemToObject(t, "bytes", bytes);
            cJSON_AddItemToArray(tops, t);
        }
        cJSON_AddItemToArray(arr, o);
    }
    return root;
}

/* code points in a valid UTF-8 string */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

cJSON *gw_lps_completion_json(struct gw_lps *l, const struct gw_text *text, size_t from, size_t to)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(root, "tokens");
    cJSON *lps = cJSON_AddArrayToObject(root, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(root, "top_logprobs");
    cJSON *offs = cJSON_AddArrayToObject(root, "text_offset");
    char tok[256];
    for (size_t i = from; i < to; i++) {
        const struct gw_lps_entry *e = &l->v[i];
        token_text(text, e->id, tok, sizeof(tok), NULL);
        cJSON_AddItemToArray(toks, cJSON_CreateString(tok));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(e->logprob));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)l->offset));
        l->offset += utf8_chars(tok); /* characters, as vLLM (Python str offsets) */
        cJSON *t = cJSON_CreateObject();
        for (int k = 0; k < e->n_top; k++) {
            char alt[256];
            token_text(text, e->top_ids[k], alt, sizeof(alt), NULL);
            if (!cJSON_GetObjectItemCaseSensitive(t, alt))
                cJSON_AddNumberToObject(t, alt, e->top_lps[k]);
        }
        cJSON_AddItemToArray(tops, t);
    }
    return root;
}
