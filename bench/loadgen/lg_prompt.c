/* lg_prompt: synthetic prompts of an exact token count. */
#include "loadgen/lg_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/xalloc.h"

/* common English words; with a leading space each is one token in the Qwen vocabulary */
static const char *const words[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "that",  "for",   "it",    "as",
    "was",   "with",  "be",    "by",    "on",    "not",   "he",    "this",  "are",   "or",
    "his",   "from",  "at",    "which", "but",   "have",  "an",    "had",   "they",  "you",
    "were",  "their", "one",   "all",   "we",    "can",   "her",   "has",   "there", "been",
    "if",    "more",  "when",  "will",  "would", "who",   "so",    "no",    "time",  "world",
    "water", "house", "light", "river", "table", "green", "small", "great", "city",  "music",
    "paper", "story", "night", "stone"};

uint64_t lg_prompt_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* the fields every body carries */
static cJSON *body_common(const struct lg_cfg *c)
{
    cJSON *j = cJSON_CreateObject();
    if (c->model[0])
        cJSON_AddStringToObject(j, "model", c->model);
    cJSON_AddNumberToObject(j, "max_tokens", c->output_len);
    cJSON_AddBoolToObject(j, "stream", 1);
    cJSON *so = cJSON_AddObjectToObject(j, "stream_options");
    cJSON_AddBoolToObject(so, "include_usage", 1);
    if (c->ignore_eos)
        cJSON_AddBoolToObject(j, "ignore_eos", 1);
    if (c->temperature >= 0)
        cJSON_AddNumberToObject(j, "temperature", c->temperature);
    return j;
}

static char *print_free(cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s)
        abort(); /* cJSON only fails on OOM */
    return s;
}

static char *completion_body(const struct lg_cfg *c, uint64_t *rng)
{
    cJSON *j = body_common(c);
    cJSON *p = cJSON_AddArrayToObject(j, "prompt");
    for (int i = 0; i < c->prompt_len; i++) {
        uint64_t r = lg_prompt_rand(rng) % (LG_TOKEN_HI - LG_TOKEN_LO);
        cJSON_AddItemToArray(p, cJSON_CreateNumber((double)(LG_TOKEN_LO + r)));
    }
    return print_free(j);
}

static cJSON *messages(const char *text)
{
    cJSON *arr = cJSON_CreateArray();
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", text);
    cJSON_AddItemToArray(arr, m);
    return arr;
}

/* words[0..k) of the request's sequence joined by spaces */
static char *join(const int *seq, int k)
{
    size_t n = 1;
    for (int i = 0; i < k; i++)
        n += strlen(words[seq[i]]) + 1;
    char *s = xmalloc(n);
    size_t o = 0;
    for (int i = 0; i < k; i++) {
        size_t l = strlen(words[seq[i]]);
        if (i)
            s[o++] = ' ';
        memcpy(s + o, words[seq[i]], l);
        o += l;
    }
    s[o] = '\0';
    return s;
}

/* tokens of the chat prompt holding text, through POST /tokenize */
static int count_tokens(const struct lg_cfg *c, const char *text, int *count, char *err,
                        size_t errlen)
{
    cJSON *j = cJSON_CreateObject();
    if (c->model[0])
        cJSON_AddStringToObject(j, "model", c->model);
    cJSON_AddItemToObject(j, "messages", messages(text));
    char *body = print_free(j);
    int status;
    char *resp = NULL;
    int rc = lg_http_fetch(&c->url, "POST", "/tokenize", body, 60000, &status, &resp, err, errlen);
    free(body);
    if (rc < 0)
        return rc;
    cJSON *r = status == 200 ? cJSON_Parse(resp) : NULL;
    cJSON *cnt = r ? cJSON_GetObjectItemCaseSensitive(r, "count") : NULL;
    if (!cnt || !cJSON_IsNumber(cnt)) {
        snprintf(err, errlen, "POST /tokenize: status %d: %.160s", status, resp);
        rc = ERR_PROTO;
    } else {
        *count = (int)cnt->valuedouble;
    }
    cJSON_Delete(r);
    free(resp);
    return rc;
}

/* a user message whose chat prompt has c->prompt_len tokens; *k_guess carries the word count
 * that worked last time */
static char *chat_body(const struct lg_cfg *c, uint64_t *rng, int *k_guess, char *err,
                       size_t errlen)
{
    int cap = c->prompt_len + 64;
    int *seq = xmalloc((size_t)cap * sizeof(int));
    for (int i = 0; i < cap; i++)
        seq[i] = (int)(lg_prompt_rand(rng) % ARRAY_LEN(words));
    int k = *k_guess, best_k = k, best_d = -1;
    for (int round = 0; round < 6; round++) {
        char *text = join(seq, k);
        int n = 0;
        int rc = count_tokens(c, text, &n, err, errlen);
        free(text);
        if (rc < 0) {
            free(seq);
            return NULL;
        }
        int d = abs(n - c->prompt_len);
        if (best_d < 0 || d < best_d) {
            best_d = d;
            best_k = k;
        }
        if (d == 0)
            break;
        int next = k + (c->prompt_len - n);
        if (next < 1 && k == 1)
            break; /* the template alone is longer than prompt_len */
        k = next < 1 ? 1 : next > cap ? cap : next;
    }
    *k_guess = best_k;
    char *text = join(seq, best_k);
    free(seq);
    cJSON *j = body_common(c);
    cJSON_AddItemToObject(j, "messages", messages(text));
    free(text);
    return print_free(j);
}

int lg_prompt_build(const struct lg_cfg *c, int n, char ***bodies, char *err, size_t errlen)
{
    char **b = xcalloc((size_t)n, sizeof(char *));
    uint64_t rng = c->seed * 0x2545f4914f6cdd1dull + 1;
    int k_guess = c->prompt_len > 16 ? c->prompt_len - 16 : 1;
    for (int i = 0; i < n; i++) {
        if (c->endpoint == LG_ENDPOINT_COMPLETIONS) {
            b[i] = completion_body(c, &rng);
        } else {
            b[i] = chat_body(c, &rng, &k_guess, err, errlen);
            if (!b[i]) {
                lg_prompt_free(b, i);
                return ERR_PROTO;
            }
        }
    }
    *bodies = b;
    return 0;
}

void lg_prompt_free(char **bodies, int n)
{
    if (!bodies)
        return;
    for (int i = 0; i < n; i++)
        free(bodies[i]);
    free(bodies);
}
