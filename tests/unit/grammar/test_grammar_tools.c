/* grammar_tools: forced tool calls. Call texts accepted and refused at the exact byte, names and
 * parameters restricted to the tools, parallel false = one call, compile refusals, and random
 * token walks under the mask whose finished texts text/toolcall.c turns into calls with the
 * allowed names and arguments of the schema's types. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "walk.h"
#include "text/grammar.h"
#include "text/grammar_tools.h"
#include "text/rawmask.h"
#include "text/tokmask.h"
#include "text/toolcall.h"

static const char tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"c\",\"f\"]},\"opts\":{\"type\":\"object\","
    "\"properties\":{\"x\":{\"type\":\"boolean\"}},\"required\":[\"x\"]}},\"required\":["
    "\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"tz\":{\"type\":\"string\",\"pattern\":\"^[A-Z]\"},\"n\":{"
    "\"type\":\"number\",\"minimum\":0}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"ping\"}}]";

static struct grammar *compile(const char *name, bool parallel)
{
    char *spec = grammar_tools_spec(tools, name, parallel);
    CHECK(spec != NULL);
    char why[256];
    struct grammar *g = spec ? grammar_tools_compile(spec, strlen(spec), why, sizeof(why)) : NULL;
    if (!g)
        fprintf(stderr, "  compile: %s\n", why);
    CHECK(g != NULL);
    CHECK(spec && grammar_tools_is_spec(spec, strlen(spec)));
    free(spec);
    return g;
}

/* index of the first byte refused; -1: all fed (*acc: accepting at the end) */
static int refused_at(const struct grammar *g, const char *text, bool *acc)
{
    struct grammar_state s;
    grammar_state_init(&s, g);
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i++)
        if (!grammar_feed(&s, g, (uint8_t)text[i]))
            return (int)i;
    *acc = grammar_is_accepting(&s, g);
    return -1;
}

#define CALL_W "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
#define END "</function>\n</tool_call>"

struct tcase {
    const char *name; // the forced function; NULL: required
    bool parallel;
    const char *text;
    int refused; // index of the first byte refused; -1: accepted whole
    bool acc;    // with refused -1: accepting at the end
};

static const struct tcase tcases[] = {
    {NULL, true, CALL_W END, -1, true},
    {NULL, true, "\n " CALL_W END, -1, true}, // whitespace before
    {NULL, true, CALL_W END "\n", -1, true},  // whitespace after the last call
    {NULL, true, CALL_W END "\n    ", (int)strlen(CALL_W END) + 4, false}, // GRAMMAR_WS_MAX
    {NULL, true, CALL_W END "\n" CALL_W END, -1, true},
    {NULL, false, CALL_W END "\n<", (int)strlen(CALL_W END) + 1, false}, // one call only
    {NULL, false, CALL_W END " \n", -1, true},
    {NULL, true, CALL_W, -1, false}, // not closed
    {NULL, true, "<tool_call>\n<function=ping>\n" END, -1, true},
    {NULL, true, "<tool_call>\n<function=pong>\n", 23, false},            // unknown name
    {NULL, true, "<tool_call>\n<function=get_weathers>\n", 33, false},    // longer name
    {NULL, true, "Sure! <tool_call>", 0, false},                          // text first
    {NULL, true, "<tool_call>\n<function=get_weather>\n" END, 36, false}, // city required
    {NULL, true, "<tool_call>\n<function=get_weather>\n<parameter=town>\n", 46, false},
    /* order: days then city is refused at the 'd' (city comes first and is required) */
    {NULL, true, "<tool_call>\n<function=get_weather>\n<parameter=days>\n", 46, false},
    {NULL, true,
     CALL_W "<parameter=days>\n3\n</parameter>\n<parameter=unit>\nf\n</parameter>\n"
            "<parameter=opts>\n{\"x\": true}\n</parameter>\n" END,
     -1, true},
    {NULL, true, CALL_W "<parameter=days>\nthree", (int)strlen(CALL_W) + 17, false},
    {NULL, true, CALL_W "<parameter=days>\n3.5", (int)strlen(CALL_W) + 18, false},
    {NULL, true, CALL_W "<parameter=unit>\nk", (int)strlen(CALL_W) + 17, false},  // enum
    {NULL, true, CALL_W "<parameter=opts>\n{}", (int)strlen(CALL_W) + 18, false}, // x required
    {NULL, true, CALL_W "<parameter=city>\n", (int)strlen(CALL_W) + 11, false},   // twice
    /* string values: raw text, any bytes but the terminators and control bytes */
    {NULL, true,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\na \"b\" <c> "
     "</d>\n\te\n</parameter>\n" END,
     -1, true},
    {NULL, true, "<tool_call>\n<function=get_weather>\n<parameter=city>\nx</function>", 63, false},
    {NULL, true, "<tool_call>\n<function=get_weather>\n<parameter=city>\nx</tool_call>", 64, false},
    {NULL, true, "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\x01", 53, false},
    {NULL, true, "<tool_call>\n<function=get_weather>\n<parameter=city>\n\xc3(", 53, false},
    {NULL, true,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\n\xc3\xa9</parameter>\n" END, -1, true},
    /* a keyword outside the JSON subset: the type alone (number), the string pattern ignored */
    {NULL, true,
     "<tool_call>\n<function=get_time>\n<parameter=tz>\nany\n</parameter>\n<parameter=n>\n-1.5\n"
     "</parameter>\n" END,
     -1, true},
    {NULL, true, "<tool_call>\n<function=get_time>\n<parameter=n>\nx", 46, false},
    /* named: only that function, exactly one call */
    {"ping", true, "<tool_call>\n<function=ping>\n" END, -1, true},
    {"ping", true, "<tool_call>\n<function=get_weather>\n", 22, false},
    {"ping", true, "<tool_call>\n<function=ping>\n" END "\n<", 53, false},
};

static void test_texts(void)
{
    for (size_t i = 0; i < sizeof(tcases) / sizeof(tcases[0]); i++) {
        const struct tcase *c = &tcases[i];
        struct grammar *g = compile(c->name, c->parallel);
        if (!g)
            continue;
        bool acc = false;
        int at = refused_at(g, c->text, &acc);
        if (at != c->refused || (at < 0 && acc != c->acc)) {
            fprintf(stderr, "  case %zu: refused at %d (want %d), accepting %d (want %d): %s\n", i,
                    at, c->refused, acc, c->acc, c->text);
            CHECK(false);
        }
        grammar_destroy(g);
    }
}

static void expect_refused(const char *spec, const char *want)
{
    char why[256] = "";
    struct grammar *g = grammar_tools_compile(spec, strlen(spec), why, sizeof(why));
    CHECK(g == NULL);
    if (!strstr(why, want)) {
        fprintf(stderr, "  refusal \"%s\", want \"%s\"\n", why, want);
        CHECK(false);
    }
    grammar_destroy(g);
}

static void test_raw_neutral(void)
{
    CHECK(grammar_is_raw_neutral("Paris \"x\" {}\n\t", 13));
    CHECK(grammar_is_raw_neutral("\xc3\xa9", 2));
    CHECK(!grammar_is_raw_neutral("\xc3", 1)); // partial UTF-8
    CHECK(!grammar_is_raw_neutral("a<b", 3));
    CHECK(!grammar_is_raw_neutral("\x01", 1));
    CHECK(!grammar_is_raw_neutral("", 0));
    struct grammar *g = compile(NULL, true);
    struct grammar_state s;
    grammar_state_init(&s, g);
    CHECK(!grammar_in_raw(&s, g));
    const char *pre = CALL_W "<parameter=unit>\n";
    CHECK(grammar_feed_bytes(&s, g, pre, strlen(pre)));
    CHECK(!grammar_in_raw(&s, g)); // an enum, not raw text
    grammar_state_init(&s, g);
    pre = "<tool_call>\n<function=get_weather>\n<parameter=city>\n";
    CHECK(grammar_feed_bytes(&s, g, pre, strlen(pre)));
    CHECK(grammar_in_raw(&s, g));
    CHECK(grammar_feed_bytes(&s, g, "ab<", 3));
    CHECK(!grammar_in_raw(&s, g)); // a terminator may have begun
    CHECK(grammar_feed_bytes(&s, g, "x\xc3", 2));
    CHECK(!grammar_in_raw(&s, g)); // inside a character
    CHECK(grammar_feed_bytes(&s, g, "\xa9", 1));
    CHECK(grammar_in_raw(&s, g));
    grammar_destroy(g);
}

static void test_refusals(void)
{
    char *s =
        grammar_tools_spec("[{\"type\":\"function\",\"function\":{\"name\":\"a>b\"}}]", NULL, true);
    expect_refused(s, "cannot be written as a tag");
    free(s);
    s = grammar_tools_spec(tools, "nope", true);
    expect_refused(s, "unknown function 'nope'");
    free(s);
    expect_refused("{\"tern_tool_calls\":{\"tools\":5,\"parallel\":true}}", "invalid");
    /* 65 tools: "required" refuses, a named choice among them does not */
    char big[65 * 64 + 16] = "[";
    for (int i = 0; i < 65; i++)
        snprintf(big + strlen(big), sizeof(big) - strlen(big),
                 "%s{\"type\":\"function\",\"function\":{\"name\":\"f%d\"}}", i ? "," : "", i);
    strcat(big, "]");
    s = grammar_tools_spec(big, NULL, true);
    expect_refused(s, "more than 64 tools");
    free(s);
    s = grammar_tools_spec(big, "f64", true);
    struct grammar *g = grammar_tools_compile(s, strlen(s), NULL, 0);
    CHECK(g != NULL);
    grammar_destroy(g);
    free(s);
    /* a JSON Schema is not a spec */
    CHECK(!grammar_tools_is_spec("{\"type\":\"object\"}", 17));
    g = grammar_compile_any("{\"type\":\"object\"}", 17, NULL, 0);
    CHECK(g != NULL);
    grammar_destroy(g);
}

// ---- masks ----

static const char *const words[] = {
    "<tool_call>", "</tool_call>",
    "<",           "</",
    ">",           ">\n",
    "\n",          "\n\n",
    " ",           "tool",
    "_call",       "<function=",
    "function",    "=",
    "get",         "_weather",
    "get_weather", "get_time",
    "ping",        "_time",
    "<parameter=", "</parameter>",
    "parameter",   "city",
    "days",        "unit",
    "opts",        "tz",
    "n",           "</function>",
    "Paris",       " de",
    "\"",          "{",
    "}",           "{\"",
    "\":",         "x",
    "true",        "false",
    "1",           "12",
    "-",           ".",
    "5",           "e",
    "c",           "f",
    "é",           "\xc3",
    "\xa9",        "a<b",
    "</d",         "\t",
    "\x01",        "null",
};
#define N_WORDS ((int)(sizeof(words) / sizeof(words[0])))
#define NV (N_WORDS + 95) // and every printable ASCII byte alone: no dead ends
static const char *vocab[NV];
static char singles[95][2];

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void)
{
    return walk_rnd(&rng_state);
}

/* the finished text's calls: known names, arguments that are JSON objects of the schema's types */
static void check_calls(const char *text, size_t len, const char *only, bool parallel)
{
    struct toolcall *tc = toolcall_create(tools, 1);
    const struct toolcall_event *ev;
    size_t n_ev;
    toolcall_feed(tc, text, len, &ev, &n_ev);
    for (size_t i = 0; i < n_ev; i++)
        CHECK(ev[i].type != TOOLCALL_EVENT_CONTENT || ev[i].len == 0);
    toolcall_flush(tc, &ev, &n_ev);
    int n = toolcall_count(tc);
    CHECK(n >= 1);
    CHECK(parallel || n == 1);
    for (int i = 0; i < n; i++) {
        const char *id, *name, *args;
        CHECK(toolcall_get(tc, i, &id, &name, &args) == 0);
        CHECK(!only || !strcmp(name, only));
        CHECK(!strcmp(name, "get_weather") || !strcmp(name, "get_time") || !strcmp(name, "ping"));
        cJSON *a = cJSON_Parse(args);
        CHECK(cJSON_IsObject(a));
        cJSON *v = cJSON_GetObjectItem(a, "days");
        CHECK(!v || (cJSON_IsNumber(v) && v->valuedouble == (double)(int64_t)v->valuedouble));
        v = cJSON_GetObjectItem(a, "n");
        CHECK(!v || cJSON_IsNumber(v));
        v = cJSON_GetObjectItem(a, "opts");
        CHECK(!v || cJSON_IsBool(cJSON_GetObjectItem(v, "x")));
        v = cJSON_GetObjectItem(a, "unit");
        CHECK(!v || !strcmp(cJSON_GetStringValue(v), "c") || !strcmp(cJSON_GetStringValue(v), "f"));
        CHECK(strcmp(name, "get_weather") || cJSON_IsString(cJSON_GetObjectItem(a, "city")));
        if (!cJSON_IsObject(a))
            fprintf(stderr, "  arguments %s from %.*s\n", args, (int)len, text);
        cJSON_Delete(a);
    }
    toolcall_destroy(tc);
}

/* the mask against brute force at every step of random walks */
static void walk(struct tokmask *tm, struct rawmask *rm, const char *only, bool parallel, int walks,
                 int *n_done, int *n_raw)
{
    struct grammar *g = compile(only, parallel);
    if (!g)
        return;
    uint32_t mask[TOKMASK_WORDS(NV)];
    for (int w = 0; w < walks; w++) {
        struct grammar_state s;
        grammar_state_init(&s, g);
        char text[8192];
        size_t len = 0;
        for (int step = 0; step < 400; step++) {
            int n = tokmask_compute(tm, g, &s, mask);
            int brute = 0;
            for (int id = 0; id < NV; id++) {
                struct grammar_state t;
                grammar_state_copy(&t, &s);
                bool ok = grammar_feed_bytes(&t, g, vocab[id], strlen(vocab[id]));
                bool bit = mask[id >> 5] >> (id & 31) & 1;
                brute += ok;
                if (ok != bit) {
                    fprintf(stderr, "  after \"%.*s\": token \"%s\" brute %d mask %d\n", (int)len,
                            text, vocab[id], ok, bit);
                    CHECK(false);
                }
            }
            CHECK_EQ_INT(n, brute);
            if (grammar_in_raw(&s, g)) { // the shortcut gives the same mask
                uint32_t raw[TOKMASK_WORDS(NV)];
                CHECK_EQ_INT(rawmask_compute(rm, g, &s, raw), n);
                CHECK(memcmp(raw, mask, sizeof(raw)) == 0);
                (*n_raw)++;
            }
            bool acc = grammar_is_accepting(&s, g);
            if ((acc && (n == 0 || rnd() % 3 == 0)) || n == 0)
                break;
            int pick = walk_pick(mask, NV, &rng_state);
            if (step > 20 && (step > 60 || rnd() % 2)) // steer to the end: a closing tag
                for (int id = NV - 1; id >= 0; id--)
                    if ((mask[id >> 5] >> (id & 31) & 1) && vocab[id][0] == '<' &&
                        vocab[id][1] == '/' && strlen(vocab[id]) > 3)
                        pick = id;
            CHECK(tokmask_advance(tm, g, &s, pick));
            size_t l = strlen(vocab[pick]);
            if (len + l < sizeof(text)) {
                memcpy(text + len, vocab[pick], l);
                len += l;
            }
        }
        if (!grammar_is_accepting(&s, g) && getenv("TOOLS_DEBUG"))
            fprintf(stderr, "  unfinished: %.*s\n", (int)len, text);
        if (grammar_is_accepting(&s, g)) {
            (*n_done)++;
            check_calls(text, len, only, parallel);
        }
    }
    grammar_destroy(g);
}

static void test_mask(void)
{
    const char *bytes[NV];
    size_t lens[NV];
    for (int i = 0; i < N_WORDS; i++)
        vocab[i] = words[i];
    for (int i = 0; i < 95; i++) {
        singles[i][0] = (char)(0x20 + i);
        vocab[N_WORDS + i] = singles[i];
    }
    for (int i = 0; i < NV; i++) {
        bytes[i] = vocab[i];
        lens[i] = strlen(vocab[i]);
    }
    struct tokmask *tm = tokmask_create(NV, bytes, lens);
    struct rawmask *rm = rawmask_create(NV, bytes, lens);
    int n_done = 0, n_raw = 0;
    walk(tm, rm, NULL, true, 80, &n_done, &n_raw);
    walk(tm, rm, NULL, false, 80, &n_done, &n_raw);
    walk(tm, rm, "get_weather", true, 80, &n_done, &n_raw);
    fprintf(stderr, "walks finished: %d, raw-text masks checked: %d\n", n_done, n_raw);
    CHECK(n_done > 60);
    CHECK(n_raw > 100);
    rawmask_destroy(rm);
    tokmask_destroy(tm);
}

int main(void)
{
    test_texts();
    test_refusals();
    test_raw_neutral();
    test_mask();
    return test_result();
}
