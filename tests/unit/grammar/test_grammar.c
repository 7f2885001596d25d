/* grammar + tokmask: byte strings accepted / refused per schema construct, refusals naming the
 * keyword, and the trie mask against a brute-force scan of a small vocabulary along random walks
 * whose every finished text must parse and conform (schema_check). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "schema_check.h"
#include "test.h"
#include "walk.h"
#include "text/grammar.h"
#include "text/tokmask.h"

static bool accepts(const struct grammar *g, const char *text)
{
    struct grammar_state s;
    grammar_state_init(&s, g);
    return grammar_feed_bytes(&s, g, text, strlen(text)) && grammar_is_accepting(&s, g);
}

struct acase {
    const char *schema;
    const char *text;
    bool ok;
};

static const struct acase acases[] = {
    {"{\"type\":\"object\"}", "{}", true},
    {"{\"type\":\"object\"}", "{\"a\": [1, -2.5e+3, \"x\\n\\u00e9\", true, null, {\"b\": {}}]}",
     true},
    {"{\"type\":\"object\"}", " {\"a\":1}", true},
    {"{\"type\":\"object\"}", "{\"a\":1} ", false}, // nothing after the value
    {"{\"type\":\"object\"}", "{\"a\":1}}", false},
    {"{\"type\":\"object\"}", "[1]", false},
    {"{\"type\":\"object\"}", "{\"a\":1", false},   // not closed
    {"{\"type\":\"object\"}", "{\"a\":01}", false}, // leading zero
    {"{\"type\":\"object\"}", "{\"a\":1.}", false},
    {"{\"type\":\"object\"}", "{\"a\":tru}", false},
    {"{\"type\":\"object\"}", "{\"a\":\"\\ud800\"}", false},       // lone surrogate escape
    {"{\"type\":\"object\"}", "{\"a\":\"\xc3\xa9\"}", true},       // UTF-8
    {"{\"type\":\"object\"}", "{\"a\":\"\xc3\"}", false},          // truncated UTF-8
    {"{\"type\":\"object\"}", "{\"a\":\"\xed\xa0\x80\"}", false},  // encoded surrogate
    {"{\"type\":\"object\"}", "{\"a\":\"\x01\"}", false},          // raw control byte
    {"{\"type\":\"object\"}", "{    \"a\":1}", true},              // GRAMMAR_WS_MAX spaces
    {"{\"type\":\"object\"}", "{     \"a\":1}", false},            // one more
    {"{\"type\":\"object\"}", "{\"a\":\"     \"}", true},          // spaces in strings are text
    {"{\"type\":\"object\"}", "{\"a\":12345678901234567}", false}, // 17 digits
    {"{\"type\":\"object\"}", "{\"a\":1e1234}", false},
    {"{}", "\"x\"", true},
    {"{}", "-0.5", true},
    {"{}", "null", true},
    {"{\"type\":\"integer\"}", "-42", true},
    {"{\"type\":\"integer\"}", "4.2", false},
    {"{\"type\":\"integer\"}", "4e2", false},
    {"{\"type\":\"number\"}", "4.25E-2", true},
    {"{\"type\":\"boolean\"}", "false", true},
    {"{\"type\":\"boolean\"}", "null", false},
    {"{\"type\":[\"string\",\"null\"]}", "null", true},
    {"{\"type\":[\"string\",\"null\"]}", "\"s\"", true},
    {"{\"type\":[\"string\",\"null\"]}", "1", false},
    {"{\"type\":[\"integer\",\"number\"]}", "1.5", true},
    {"{\"enum\":[\"red\",\"green\",1,12,true,null]}", "\"green\"", true},
    {"{\"enum\":[\"red\",\"green\",1,12,true,null]}", "12", true},
    {"{\"enum\":[\"red\",\"green\",1,12,true,null]}", "1", true},
    {"{\"enum\":[\"red\",\"green\",1,12,true,null]}", "\"blue\"", false},
    {"{\"enum\":[\"red\",\"green\",1,12,true,null]}", "123", false},
    {"{\"const\":\"x\"}", "\"x\"", true},
    {"{\"const\":\"x\"}", "\"y\"", false},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[1]",
     true},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}",
     "[1, 2]", true},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[]",
     false},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}",
     "[1,2,3]", false},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}",
     "[\"a\"]", false},
    {"{\"type\":\"array\",\"maxItems\":0}", "[]", true},
    {"{\"type\":\"array\",\"maxItems\":0}", "[1]", false},
// properties: schema order, required present, optional skippable, nothing else
#define P                                                                                          \
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":"            \
    "\"integer\"},"                                                                                \
    "\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"],\"additionalProperties\":false}"
    {P, "{\"b\":1}", true},
    {P, "{\"a\":\"x\",\"b\":1,\"c\":true}", true},
    {P, "{ \"a\" : \"x\" , \"b\" : 1 }", true},
    {P, "{\"b\":1,\"c\":false}", true},
    {P, "{}", false}, // b required
    {P, "{\"a\":\"x\"}", false},
    {P, "{\"a\":\"x\",\"c\":true}", false}, // skips required b
    {P, "{\"b\":1,\"a\":\"x\"}", false},    // out of schema order
    {P, "{\"b\":1,\"d\":1}", false},
    {P, "{\"b\":\"1\"}", false},
    {P, "{\"bb\":1}", false},
    {"{\"type\":\"object\",\"additionalProperties\":false}", "{}", true},
    {"{\"type\":\"object\",\"additionalProperties\":false}", "{\"a\":1}", false},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":1,\"b\":2}",
     true},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":\"1\"}",
     false},
    {"{\"properties\":{\"k\\\"q\":{\"const\":1}},\"required\":[\"k\\\"q\"]}", "{\"k\\\"q\":1}",
     true},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":{\"type\":\"null\"}}]}",
     "[null]", true},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":{\"type\":\"null\"}}]}",
     "[1]", false},
    // nesting
    {"{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"object\",\"properties\":{\"q\":{"
     "\"type\":"
     "\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},\"maxItems\":3}},\"required\":[\"q\"]}},"
     "\"required\":[\"p\"]}",
     "{\"p\":{\"q\":[\"x\",\"y\",\"x\"]}}", true},
    {"{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"object\",\"properties\":{\"q\":{"
     "\"type\":"
     "\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},\"maxItems\":3}},\"required\":[\"q\"]}},"
     "\"required\":[\"p\"]}",
     "{\"p\":{\"q\":[\"x\",\"z\"]}}", false},
};

static void test_accept(void)
{
    for (size_t i = 0; i < sizeof(acases) / sizeof(acases[0]); i++) {
        char err[256];
        struct grammar *g =
            grammar_compile(acases[i].schema, strlen(acases[i].schema), err, sizeof(err));
        CHECK(g != NULL);
        if (!g) {
            fprintf(stderr, "  schema %s: %s\n", acases[i].schema, err);
            continue;
        }
        if (accepts(g, acases[i].text) != acases[i].ok) {
            fprintf(stderr, "  case %zu: %s on %s: expected %s\n", i, acases[i].schema,
                    acases[i].text, acases[i].ok ? "accept" : "refuse");
            CHECK(false);
        }
        grammar_destroy(g);
    }
}

static void test_depth(void)
{
    struct grammar *g = grammar_compile("{}", 2, NULL, 0);
    struct grammar_state s;
    grammar_state_init(&s, g);
    int n = 0;
    while (grammar_feed(&s, g, '['))
        n++;
    CHECK_EQ_INT(n, GRAMMAR_DEPTH_MAX);
    grammar_destroy(g);
}

struct rcase {
    const char *schema;
    const char *err; // substring of the reason
};

static const struct rcase rcases[] = {
    {"{\"type\":\"string\",\"pattern\":\"a+\"}", "unsupported keyword 'pattern' at /"},
    {"{\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"date\"}}}",
     "unsupported keyword 'format' at /properties/a"},
    {"{\"$ref\":\"#/$defs/x\"}", "'$ref'"},
    {"{\"oneOf\":[]}", "'oneOf'"},
    {"{\"type\":\"array\",\"items\":[{}]}", "'items' (array form)"},
    {"{\"type\":\"array\",\"items\":{\"minLength\":1}}", "'minLength' at /items"},
    {"{\"type\":\"tuple\"}", "unsupported type 'tuple'"},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"enum\":[\"a\"]}]}", "overlap"},
    {"{\"enum\":[{\"a\":1}]}", "enum value"},
    {"{\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "'b' is not in properties"},
    {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "minItems"},
    {"{\"type\":\"array\",\"minItems\":-1}", "minItems"},
    {"[1]", "not an object"},
    {"{\"enum\":[1e400]}", "out of range"},
    {"{", "not JSON"},
};

static void test_refuse(void)
{
    for (size_t i = 0; i < sizeof(rcases) / sizeof(rcases[0]); i++) {
        char err[256] = "";
        struct grammar *g =
            grammar_compile(rcases[i].schema, strlen(rcases[i].schema), err, sizeof(err));
        CHECK(g == NULL);
        if (!strstr(err, rcases[i].err)) {
            fprintf(stderr, "  %s: got \"%s\", want \"%s\"\n", rcases[i].schema, err,
                    rcases[i].err);
            CHECK(false);
        }
        grammar_destroy(g);
    }
    /* nesting: GRAMMAR_SCHEMA_DEPTH_MAX levels compile and the deepest value is reachable, one
     * more is refused */
    for (int extra = 0; extra <= 1; extra++) {
        int levels = GRAMMAR_SCHEMA_DEPTH_MAX + extra;
        char sch[1024] = "", doc[256] = "";
        for (int i = 0; i < levels; i++) {
            strcat(sch, "{\"type\":\"array\",\"minItems\":1,\"items\":");
            strcat(doc, "[");
        }
        strcat(sch, "{\"type\":\"integer\"}");
        strcat(doc, "7");
        for (int i = 0; i < levels; i++) {
            strcat(sch, "}");
            strcat(doc, "]");
        }
        char err[256] = "";
        struct grammar *g = grammar_compile(sch, strlen(sch), err, sizeof(err));
        CHECK(extra ? g == NULL && strstr(err, "nested deeper") : g != NULL);
        if (g)
            CHECK(accepts(g, doc));
        grammar_destroy(g);
    }
    const char *ok = "{\"title\":\"t\",\"description\":\"d\",\"strict\":true,\"$schema\":\"x\","
                     "\"type\":\"object\",\"properties\":{\"a\":{\"default\":1,\"examples\":[1]}}}";
    struct grammar *g = grammar_compile(ok, strlen(ok), NULL, 0);
    CHECK(g != NULL);
    grammar_destroy(g);
}

// ---- masks ----

static const char *const vocab_words[] = {
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    " ",
    "  ",
    "\n",
    "\n  ",
    "{\"",
    "\":",
    "\": ",
    "\",",
    "\"}",
    "},",
    "}]",
    "]}",
    "[\"",
    "\"]",
    ", ",
    ",\"",
    "a",
    "b",
    "c",
    "p",
    "q",
    "k",
    "x",
    "y",
    "red",
    "green",
    "\"red\"",
    "gr",
    "een",
    "true",
    "tr",
    "ue",
    "false",
    "null",
    "nu",
    "ll",
    "0",
    "1",
    "12",
    "-",
    ".",
    "5",
    "e",
    "E+",
    "e-",
    "\\",
    "\\n",
    "\\u",
    "00e9",
    "d8",
    "\xc3",
    "\xa9",
    "\xc3\xa9",
    "\xe2\x82\xac",
    "\"a\"",
    "\"b\":",
    "\"c\":",
    "hello",
    " world",
    "1,",
    "2]",
    "},{",
    "\"q\":[",
    "\"p\":{",
    "]}}",
    "\x01",
    "\"\"",
    "\",\"",
    "\": \"",
    "\":\"",
    "\"\\\"",
    "\"\\u00",
    "\"\xc3",
    "\xa9\"",
    "\"}}",
    "x\\\"",
    "\"}, {\"",
};

#define NV ((int)(sizeof(vocab_words) / sizeof(vocab_words[0])))

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    return walk_rnd(&rng_state);
}

/* compare with brute force at every step of random walks; finished texts must conform */
static void walk_schema(struct tokmask *tm, const char *schema, int walks, int *n_done)
{
    struct grammar *g = grammar_compile(schema, strlen(schema), NULL, 0);
    CHECK(g != NULL);
    if (!g)
        return;
    cJSON *sch = cJSON_Parse(schema);
    uint32_t mask[TOKMASK_WORDS(NV)];
    for (int w = 0; w < walks; w++) {
        struct grammar_state s;
        grammar_state_init(&s, g);
        char text[4096];
        size_t len = 0;
        for (int step = 0; step < 200; step++) {
            int n = tokmask_compute(tm, g, &s, mask);
            uint32_t ref[TOKMASK_WORDS(NV)];
            CHECK_EQ_INT(tokmask_compute_ref(tm, g, &s, ref), n);
            CHECK(memcmp(ref, mask, sizeof(mask)) == 0);
            int brute = 0;
            for (int id = 0; id < NV; id++) {
                struct grammar_state t;
                grammar_state_copy(&t, &s);
                bool ok = grammar_feed_bytes(&t, g, vocab_words[id], strlen(vocab_words[id]));
                bool bit = mask[id >> 5] >> (id & 31) & 1;
                brute += ok;
                if (ok != bit) {
                    fprintf(stderr, "  %s after \"%.*s\": token \"%s\" brute %d mask %d\n", schema,
                            (int)len, text, vocab_words[id], ok, bit);
                    CHECK(false);
                }
            }
            CHECK_EQ_INT(n, brute);
            bool acc = grammar_is_accepting(&s, g);
            if (grammar_is_done(&s))
                CHECK_EQ_INT(n, 0);
            if ((acc && (n == 0 || rnd() % 4 == 0)) || n == 0)
                break;
            // prefer closing tokens half of the time so that walks finish
            int pick = walk_pick(mask, NV, &rng_state);
            if (step > 40 && rnd() % 2) // steer to the end: a closing token if one is allowed
                for (int id = 0; id < NV; id++)
                    if ((mask[id >> 5] >> (id & 31) & 1) && strpbrk(vocab_words[id], "}]\""))
                        pick = id;
            CHECK(tokmask_advance(tm, g, &s, pick));
            size_t l = strlen(vocab_words[pick]);
            if (len + l < sizeof(text)) {
                memcpy(text + len, vocab_words[pick], l);
                len += l;
            }
        }
        if (grammar_is_accepting(&s, g)) {
            (*n_done)++;
            cJSON *v = cJSON_ParseWithLength(text, len);
            CHECK(v != NULL);
            CHECK(v && schema_check(sch, v));
            if (!v || !schema_check(sch, v))
                fprintf(stderr, "  %s: produced %.*s\n", schema, (int)len, text);
            cJSON_Delete(v);
        }
    }
    cJSON_Delete(sch);
    grammar_destroy(g);
}

static void test_mask(void)
{
    const char *bytes[NV];
    size_t lens[NV];
    for (int i = 0; i < NV; i++) {
        bytes[i] = vocab_words[i];
        lens[i] = strlen(vocab_words[i]);
    }
    struct tokmask *tm = tokmask_create(NV, bytes, lens);
    CHECK(tm != NULL);
    const char *schemas[] = {
        "{\"type\":\"object\"}",
        P,
        "{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"object\",\"properties\":{\"q\":"
        "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\",\"red\"]},\"minItems\":1,"
        "\"maxItems\":3}},\"required\":[\"q\"]}},\"required\":[\"p\"]}",
        "{\"type\":\"array\",\"items\":{\"type\":[\"number\",\"null\"]},\"maxItems\":4}",
        "{\"enum\":[\"red\",\"green\",12,true]}",
    };
    int n_done = 0;
    for (size_t i = 0; i < sizeof(schemas) / sizeof(schemas[0]); i++)
        walk_schema(tm, schemas[i], 60, &n_done);
    CHECK(n_done > 100);
    tokmask_destroy(tm);
}

int main(void)
{
    test_accept();
    test_depth();
    test_refuse();
    test_mask();
    return test_result();
}
