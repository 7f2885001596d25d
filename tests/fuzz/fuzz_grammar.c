/* fuzz_grammar: a schema and a text. Checks text/grammar.h's promises: compiling never crashes,
 * and refuses with a reason; a text the automaton accepts parses as JSON and conforms to the
 * schema (tests/unit/grammar/schema_check.c); and along the text, the token mask over a small
 * vocabulary (text/tokmask.h) equals feeding each token's bytes to a copy of the state, and the
 * optimized mask equals the reference walk's.
 * Input: the schema, a 0xFF separator, then the text. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "schema_check.h"
#include "text/grammar.h"
#include "text/tokmask.h"

static const char *const vocab[] = {
    "{",     "}",    "[",  "]",     ",",     ":",      "\"",    " ",    "\n",     "{\"",      "\":",
    "\",",   "\"}",  "},", "]}",    "a",     "ab",     "true",  "tr",   "null",   "0",        "1",
    "-",     ".",    "e",  "E+",    "\\",    "\\u",    "d8",    "\xc3", "\xa9",   "\xc3\xa9", "12",
    "\"a\"", "\x01", "ue", "false", "\",\"", "\": \"", "\"\\u", "\\\"", "\"\xc3", "\xa9\"}",  "\"]",
};
#define NV ((int)(sizeof(vocab) / sizeof(vocab[0])))

static struct tokmask *tm;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    size_t lens[NV];
    for (int i = 0; i < NV; i++)
        lens[i] = strlen(vocab[i]);
    tm = tokmask_create(NV, (const char *const *)vocab, lens);
    return 0;
}

static void check_mask(const struct grammar *g, const struct grammar_state *s)
{
    uint32_t mask[TOKMASK_WORDS(NV)];
    uint32_t ref[TOKMASK_WORDS(NV)];
    int n = tokmask_compute(tm, g, s, mask);
    if (tokmask_compute_ref(tm, g, s, ref) != n || memcmp(ref, mask, sizeof(mask)) != 0) {
        fprintf(stderr, "grammar: optimized and reference masks differ\n");
        __builtin_trap();
    }
    int brute = 0;
    for (int id = 0; id < NV; id++) {
        struct grammar_state t;
        grammar_state_copy(&t, s);
        bool ok = grammar_feed_bytes(&t, g, vocab[id], strlen(vocab[id]));
        brute += ok;
        if (ok != (bool)(mask[id >> 5] >> (id & 31) & 1)) {
            fprintf(stderr, "grammar: mask and brute force differ on token %d\n", id);
            __builtin_trap();
        }
    }
    if (n != brute)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    size_t n_schema;
    const uint8_t *schema = fz_piece(&f, &n_schema);
    char err[256] = "";
    struct grammar *g = grammar_compile((const char *)schema, n_schema, err, sizeof(err));
    if (!g) {
        if (!err[0])
            __builtin_trap(); /* a refusal always says why */
        return 0;
    }
    struct grammar_state s;
    grammar_state_init(&s, g);
    size_t i = 0;
    for (; i < f.n; i++) {
        if (i < 64)
            check_mask(g, &s);
        if (!grammar_feed(&s, g, f.p[i]))
            break;
    }
    if (i == f.n && grammar_is_accepting(&s, g)) {
        cJSON *sch = cJSON_ParseWithLength((const char *)schema, n_schema);
        cJSON *v = cJSON_ParseWithLength((const char *)f.p, f.n);
        if (!v || !sch || !schema_check(sch, v)) {
            fprintf(stderr, "grammar: accepted a text that %s\n",
                    v ? "does not conform" : "is not JSON");
            __builtin_trap();
        }
        cJSON_Delete(v);
        cJSON_Delete(sch);
    }
    grammar_destroy(g);
    return 0;
}
