/* tokmask on the Qwen3 vocabulary (151,669 ids): the optimized mask (tokmask_compute: per string
 * text state sets, tokens after opening quotes, next-byte filter) equals the reference walk
 * (tokmask_compute_ref) bit by bit at every step of random walks over the bench_grammar schemas,
 * json_object and a few more, with steps steered into escapes and partial UTF-8 so that every
 * string text state is seen. Skips when .deps (tokenizer.json) is missing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "text/grammar.h"
#include "text/tokenizer.h"
#include "text/tokmask.h"
#include "tok_test_util.h"

#define STR_KEYS_SEEN_MAX 64

struct ctx {
    struct tokmask *tm;
    const struct tokenizer *tok;
    int n_vocab;
    size_t words;
    uint32_t *fast, *ref; // (words) masks
    int32_t *odd;         // (n_odd) ids that are not string-neutral: quotes, escapes, partial UTF-8
    int n_odd;
    int32_t *closing; // (n_closing) ids with a '"', '}' or ']'
    int n_closing;
    int32_t *allowed; // (n_vocab) scratch
    uint32_t keys[STR_KEYS_SEEN_MAX];
    int n_keys;
    long steps, mismatches;
};

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static bool has(const uint32_t *mask, int32_t id)
{
    return mask[id >> 5] >> (id & 31) & 1;
}

/* bit-by-bit comparison; prints the first differences; returns how many ids differ */
static long masks_diff(const struct ctx *c, const uint32_t *a, const uint32_t *b, const char *what)
{
    long n = 0;
    for (size_t w = 0; w < c->words; w++) {
        uint32_t d = a[w] ^ b[w];
        while (d) {
            int bit = __builtin_ctz(d);
            d &= d - 1;
            int32_t id = (int32_t)(w * 32 + (size_t)bit);
            if (n++ < 5) {
                size_t len = 0;
                const char *bytes = tokenizer_id_to_bytes(c->tok, id, &len);
                fprintf(stderr, "  %s: id %d \"%.*s\" fast %d ref %d\n", what, id, (int)len,
                        bytes ? bytes : "", has(a, id), has(b, id));
            }
        }
    }
    return n;
}

static void key_seen(struct ctx *c, uint32_t key)
{
    for (int i = 0; i < c->n_keys; i++)
        if (c->keys[i] == key)
            return;
    if (c->n_keys < STR_KEYS_SEEN_MAX)
        c->keys[c->n_keys++] = key;
}

/* a random allowed id of list (n) by probing; -1 when 256 probes miss */
static int32_t probe(const uint32_t *mask, const int32_t *list, int n)
{
    for (int tries = 0; n && tries < 256; tries++) {
        int32_t id = list[rnd() % (uint32_t)n];
        if (has(mask, id))
            return id;
    }
    return -1;
}

/* an allowed id: a third of the time one that is not string-neutral, after step 30 half of the
 * time one with a closing byte; -1 when none is allowed */
static int32_t pick(struct ctx *c, const uint32_t *mask, int step)
{
    int32_t id = -1;
    if (rnd() % 3 == 0)
        id = probe(mask, c->odd, c->n_odd);
    if (id < 0 && step > 30 && rnd() % 2)
        id = probe(mask, c->closing, c->n_closing);
    if (id >= 0)
        return id;
    for (int tries = 0; tries < 64; tries++) {
        id = (int32_t)(rnd() % (uint32_t)c->n_vocab);
        if (has(mask, id))
            return id;
    }
    int n = 0;
    for (size_t w = 0; w < c->words; w++)
        for (uint32_t m = mask[w]; m; m &= m - 1)
            c->allowed[n++] = (int32_t)(w * 32 + (size_t)__builtin_ctz(m));
    return n ? c->allowed[rnd() % (uint32_t)n] : -1;
}

/* from s (a copy), steps_max steps: both masks compared at each, then an allowed id taken */
static void walk_from(struct ctx *c, const struct grammar *g, const struct grammar_state *from,
                      const char *schema, int steps_max)
{
    struct grammar_state s;
    grammar_state_copy(&s, from);
    for (int step = 0; step < steps_max; step++) {
        int n_fast = tokmask_compute(c->tm, g, &s, c->fast);
        int n_ref = tokmask_compute_ref(c->tm, g, &s, c->ref);
        long d = masks_diff(c, c->fast, c->ref, schema);
        c->steps++;
        c->mismatches += d;
        CHECK_EQ_INT(d, 0);
        CHECK_EQ_INT(n_fast, n_ref);
        uint32_t key = grammar_str_key(&s, g);
        if (key)
            key_seen(c, key);
        if (grammar_is_accepting(&s, g) && (n_fast == 0 || rnd() % 8 == 0))
            break;
        int32_t id = pick(c, c->fast, step);
        if (id < 0)
            break;
        CHECK(tokmask_advance(c->tm, g, &s, id));
    }
}

static void walk_schema(struct ctx *c, const char *schema, int walks, int steps_max)
{
    struct grammar *g = grammar_compile(schema, strlen(schema), NULL, 0);
    CHECK(g != NULL);
    if (!g)
        return;
    struct grammar_state s;
    grammar_state_init(&s, g);
    for (int w = 0; w < walks; w++)
        walk_from(c, g, &s, schema, steps_max);
    grammar_destroy(g);
}

/* every text state of a string, reached by bytes, in keys, values, array items and a top-level
 * string; from each a short walk */
static void test_string_states(struct ctx *c)
{
    static const char *const ctx_of[][2] = {
        {"{\"type\":\"object\"}", "{\"a\":\""},
        {"{\"type\":\"object\"}", "{\""},
        {"{\"type\":\"object\"}", "{\"a\": [1, {\"b\": \""},
        {"{\"type\":\"string\"}", "\""},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2}", "[\"x\", \""},
    };
    static const char *const text[] = {
        "",         "ab",       "\\",           "\\u",    "\\ud",     "\\uD",
        "\\u0",     "\\u00",    "\\u00e",       "\\ud7f", "\xc3",     "\xe0",
        "\xe0\xa0", "\xed",     "\xed\x9f",     "\xe1",   "\xe1\x80", "\xef",
        "\xf0",     "\xf0\x90", "\xf0\x90\x80", "\xf1",   "\xf3\x80", "\xf3\x80\x80",
        "\xf4",     "\xf4\x8f", "\xf4\x8f\xbf", "x\\\"",  "\\n\xc3",  "\\u00e9\\",
    };
    for (size_t i = 0; i < sizeof(ctx_of) / sizeof(ctx_of[0]); i++) {
        struct grammar *g = grammar_compile(ctx_of[i][0], strlen(ctx_of[i][0]), NULL, 0);
        CHECK(g != NULL);
        if (!g)
            continue;
        for (size_t j = 0; j < sizeof(text) / sizeof(text[0]); j++) {
            struct grammar_state s;
            grammar_state_init(&s, g);
            bool ok = grammar_feed_bytes(&s, g, ctx_of[i][1], strlen(ctx_of[i][1])) &&
                      grammar_feed_bytes(&s, g, text[j], strlen(text[j]));
            CHECK(ok);
            CHECK(grammar_str_key(&s, g) != 0);
            if (!ok)
                continue;
            for (int w = 0; w < 3; w++)
                walk_from(c, g, &s, ctx_of[i][0], 12);
        }
        grammar_destroy(g);
    }
    CHECK_EQ_INT(c->n_keys, 14); // every text state a string can be in
}

/* the comparison itself catches a difference of one id */
static void test_diff_detects(struct ctx *c)
{
    memset(c->fast, 0, sizeof(uint32_t) * c->words);
    memset(c->ref, 0, sizeof(uint32_t) * c->words);
    c->fast[c->words - 1] = 1;
    fprintf(stderr, "(a planted difference follows)\n");
    CHECK_EQ_INT(masks_diff(c, c->fast, c->ref, "planted"), 1);
    c->ref[c->words - 1] = 1;
    CHECK_EQ_INT(masks_diff(c, c->fast, c->ref, "planted"), 0);
}

/* tokmask_grammar_vocab: regular tokens and the tool-call tags, no other added token */
static void test_grammar_vocab(const struct tokenizer *tok, int n_vocab)
{
    const char **bytes;
    size_t *lens;
    tokmask_grammar_vocab(tok, n_vocab, &bytes, &lens);
    const int32_t tc = tokenizer_token_to_id(tok, "<tool_call>");
    const int32_t tce = tokenizer_token_to_id(tok, "</tool_call>");
    const int32_t eos = tokenizer_eos_id(tok), think = tokenizer_token_to_id(tok, "<think>");
    const int32_t a = tokenizer_token_to_id(tok, "a");
    CHECK(tc >= 0 && tce >= 0 && eos >= 0 && think >= 0 && a >= 0);
    if (tc >= 0 && tce >= 0 && eos >= 0 && think >= 0 && a >= 0) {
        CHECK(bytes[tc] && lens[tc] == 11 && !memcmp(bytes[tc], "<tool_call>", 11));
        CHECK(bytes[tce] && lens[tce] == 12);
        CHECK(!bytes[eos] && lens[eos] == 0);
        CHECK(!bytes[think] && lens[think] == 0);
        CHECK(bytes[a] && lens[a] == 1 && bytes[a][0] == 'a');
    }
    /* padded rows past the tokenizer's vocabulary: never allowed */
    CHECK(!bytes[n_vocab - 1] && lens[n_vocab - 1] == 0);
    free(bytes);
    free(lens);
}

int main(void)
{
    struct tokenizer *tok = tt_load(NULL, 0);
    CHECK(tok != NULL);
    if (!tok)
        return test_result();
    struct ctx c = {.tok = tok};
    c.n_vocab = (int)tokenizer_vocab_size(tok);
    test_grammar_vocab(tok, c.n_vocab + 64);
    c.tm = tokmask_create_from_tokenizer(tok, c.n_vocab);
    CHECK(c.tm != NULL);
    c.words = TOKMASK_WORDS(c.n_vocab);
    c.fast = calloc(c.words, sizeof(uint32_t));
    c.ref = calloc(c.words, sizeof(uint32_t));
    c.allowed = malloc(sizeof(int32_t) * (size_t)c.n_vocab);
    c.odd = malloc(sizeof(int32_t) * (size_t)c.n_vocab);
    c.closing = malloc(sizeof(int32_t) * (size_t)c.n_vocab);
    for (int32_t id = 0; id < c.n_vocab; id++) {
        size_t len = 0;
        const char *b = tokenizer_id_to_bytes(tok, id, &len);
        if (!b || !len || tokenizer_is_added(tok, id))
            continue;
        if (!grammar_is_string_neutral(b, len))
            c.odd[c.n_odd++] = id;
        if (memchr(b, '"', len) || memchr(b, '}', len) || memchr(b, ']', len))
            c.closing[c.n_closing++] = id;
    }
    test_diff_detects(&c);
    const char *schemas[] = {
        // bench_grammar's three
        "{\"type\":\"object\"}",
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":"
        "{\"type\":\"integer\"},\"email\":{\"type\":\"string\"},\"tags\":{\"type\":\"array\","
        "\"items\":{\"type\":\"string\"},\"maxItems\":4},\"address\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\"}},"
        "\"required\":[\"city\"],\"additionalProperties\":false}},\"required\":[\"name\","
        "\"age\"],\"additionalProperties\":false}",
        "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\","
        "\"blue\"]},\"size\":{\"enum\":[1,2,3]},\"ok\":{\"type\":\"boolean\"},\"v\":{\"type\":"
        "[\"number\",\"null\"]}},\"required\":[\"color\",\"size\",\"ok\",\"v\"]}",
        // any value, a bare string, strings in arrays, an enum of strings with escapes
        "{}",
        "{\"type\":\"string\"}",
        "{\"type\":\"array\",\"items\":{\"type\":[\"string\",\"integer\"]},\"minItems\":1}",
        ("{\"type\":\"object\",\"properties\":{\"q\":{\"enum\":[\"a\\\"b\",\"c d\",\"\\u00e9\"]},"
         "\"s\":{\"type\":\"string\"}},\"required\":[\"q\"]}"),
    };
    test_string_states(&c);
    for (size_t i = 0; i < sizeof(schemas) / sizeof(schemas[0]); i++)
        walk_schema(&c, schemas[i], i == 0 ? 16 : 6, 120);
    fprintf(stderr, "steps=%ld mismatched_ids=%ld string_text_states_seen=%d\n", c.steps,
            c.mismatches, c.n_keys);
    CHECK(c.steps > 1000);
    free(c.fast);
    free(c.ref);
    free(c.allowed);
    free(c.odd);
    free(c.closing);
    tokmask_destroy(c.tm);
    tokenizer_destroy(tok);
    return test_result();
}
