/* The gateway's output chain on real token ids: detok -> stop -> reasoning -> toolcall, fed one
 * id at a time, must give the same reasoning / content / tool calls as decoding everything first
 * and running each stage on the whole text; plus hand-checked values for the final result.
 * Skips when .deps (tokenizer.json) is missing. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "text/detok.h"
#include "text/reasoning.h"
#include "text/stop.h"
#include "text/tokenizer.h"
#include "text/toolcall.h"
#include "tok_test_util.h"

struct acc {
    char reasoning[4096], content[4096], names[512], args[4096];
    size_t rl, cl, nl, al;
    int calls;
};

static void put(char *dst, size_t *n, size_t cap, const char *s, size_t l)
{
    if (*n + l + 1 > cap)
        l = cap - 1 - *n;
    memcpy(dst + *n, s, l);
    *n += l;
    dst[*n] = '\0';
}

struct chain {
    struct stop *st;
    struct reasoning *rs;
    struct toolcall *tc;
    struct acc a;
};

static void chain_init(struct chain *c, const char *const *stops, size_t n_stops, bool thinking,
                       const char *tools)
{
    memset(c, 0, sizeof(*c));
    c->st = stop_create(stops, n_stops);
    c->rs = reasoning_create(thinking);
    c->tc = toolcall_create(tools, 7);
}

static void chain_deinit(struct chain *c)
{
    stop_destroy(c->st);
    reasoning_destroy(c->rs);
    toolcall_destroy(c->tc);
}

static void take(struct chain *c, const struct toolcall_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == TOOLCALL_EVENT_CONTENT)
            put(c->a.content, &c->a.cl, sizeof(c->a.content), ev[i].text, ev[i].len);
        else if (ev[i].type == TOOLCALL_EVENT_ARGS)
            put(c->a.args, &c->a.al, sizeof(c->a.args), ev[i].text, ev[i].len);
        else if (ev[i].type == TOOLCALL_EVENT_START) {
            put(c->a.names, &c->a.nl, sizeof(c->a.names), ev[i].name, strlen(ev[i].name));
            put(c->a.names, &c->a.nl, sizeof(c->a.names), ";", 1);
            c->a.calls++;
        }
    }
}

/* text after detok; end: the stream is over */
static void chain_text(struct chain *c, const char *t, size_t n, bool end)
{
    const char *s;
    size_t sl;
    bool stopped = stop_feed(c->st, t, n, &s, &sl);
    struct reasoning_out ro;
    const struct toolcall_event *ev;
    size_t ne;
    reasoning_feed(c->rs, s, sl, &ro);
    put(c->a.reasoning, &c->a.rl, sizeof(c->a.reasoning), ro.reasoning, ro.reasoning_len);
    toolcall_feed(c->tc, ro.content, ro.content_len, &ev, &ne);
    take(c, ev, ne);
    if (!end && !stopped)
        return;
    stop_flush(c->st, &s, &sl);
    reasoning_feed(c->rs, s, sl, &ro);
    put(c->a.reasoning, &c->a.rl, sizeof(c->a.reasoning), ro.reasoning, ro.reasoning_len);
    toolcall_feed(c->tc, ro.content, ro.content_len, &ev, &ne);
    take(c, ev, ne);
    reasoning_flush(c->rs, &ro);
    put(c->a.reasoning, &c->a.rl, sizeof(c->a.reasoning), ro.reasoning, ro.reasoning_len);
    toolcall_feed(c->tc, ro.content, ro.content_len, &ev, &ne);
    take(c, ev, ne);
    toolcall_flush(c->tc, &ev, &ne);
    take(c, ev, ne);
}

struct chain_case {
    const char *output; /* what the model generates */
    const char *stops[2];
    size_t n_stops;
    bool thinking;
    const char *reasoning, *content, *names, *args;
};

static const char *const TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}}}}}"
    "]";

static const struct chain_case CASES[] = {
    {"Weather in \xe6\x9d\xb1\xe4\xba\xac? Use the tool.\n</think>\n\nChecking \xf0\x9f\x8c\xb8.\n"
     "<tool_call>\n<function=get_weather>\n<parameter=city>\n\xe6\x9d\xb1\xe4\xba\xac\n</"
     "parameter>\n"
     "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call><|im_end|>",
     {0},
     0,
     true,
     "Weather in \xe6\x9d\xb1\xe4\xba\xac? Use the tool.\n",
     "Checking \xf0\x9f\x8c\xb8.",
     "get_weather;",
     "{\"city\": \"\xe6\x9d\xb1\xe4\xba\xac\", \"days\": 2}"},
    {"Plain answer with caf\xc3\xa9 and \xe2\x80\x94 dashes.\nObservation: ignored<|im_end|>",
     {"\nObservation:", "never"},
     2,
     false,
     "",
     "Plain answer with caf\xc3\xa9 and \xe2\x80\x94 dashes.",
     "",
     ""},
    {"short thought</think>The end <b>bold</b> and <tool",
     {0},
     0,
     true,
     "short thought",
     "The end <b>bold</b> and <tool",
     "",
     ""},
};

int main(void)
{
    struct tokenizer *tok = tt_load(NULL, 0);
    CHECK(tok != NULL);
    if (!tok)
        return test_result();
    for (size_t k = 0; k < sizeof(CASES) / sizeof(CASES[0]); k++) {
        const struct chain_case *cc = &CASES[k];
        int32_t *ids;
        size_t n;
        CHECK_EQ_INT(tokenizer_encode(tok, cc->output, strlen(cc->output), &ids, &n), 0);
        /* streamed: one id at a time */
        struct chain s;
        chain_init(&s, cc->stops, cc->n_stops, cc->thinking, TOOLS);
        struct detok *d = detok_create(tok, TOKENIZER_DECODE_SKIP_SPECIAL);
        bool done = false;
        for (size_t i = 0; i < n && !done; i++) {
            const char *t;
            size_t l;
            CHECK_EQ_INT(detok_feed(d, ids[i], &t, &l), 0);
            chain_text(&s, t, l, false);
            done = stop_matched(s.st) >= 0;
        }
        if (!done) {
            const char *t;
            size_t l;
            detok_flush(d, &t, &l);
            chain_text(&s, t, l, true);
        }
        detok_destroy(d);
        /* whole: decode everything, then each stage once */
        struct chain w;
        chain_init(&w, cc->stops, cc->n_stops, cc->thinking, TOOLS);
        char *text;
        size_t tl;
        CHECK_EQ_INT(tokenizer_decode(tok, ids, n, TOKENIZER_DECODE_SKIP_SPECIAL, &text, &tl), 0);
        chain_text(&w, text, tl, true);
        free(text);

        CHECK_STREQ(s.a.reasoning, w.a.reasoning);
        CHECK_STREQ(s.a.content, w.a.content);
        CHECK_STREQ(s.a.names, w.a.names);
        CHECK_STREQ(s.a.args, w.a.args);
        CHECK_STREQ(w.a.reasoning, cc->reasoning);
        CHECK_STREQ(w.a.content, cc->content);
        CHECK_STREQ(w.a.names, cc->names);
        CHECK_STREQ(w.a.args, cc->args);
        chain_deinit(&s);
        chain_deinit(&w);
        free(ids);
    }
    tokenizer_destroy(tok);
    return test_result();
}
