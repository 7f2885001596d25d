/* fuzz_toolcall: the tool-call parser (qwen3_coder and hermes markup) on arbitrary text cut at
 * fuzzed points, with a tools schema from the input or a fixed one. Checks the header's promise
 * that events do not depend on the split: same content, same calls (id, name, arguments), and
 * the streamed ARGS pieces of each call concatenate to its final arguments.
 * Input: flags byte, n_seed byte, split bytes, [tools JSON, 0xFF when flags&1], text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_split.h"
#include "text/toolcall.h"

#define MAX_CALLS 64

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},"
    "\"metric\":{\"type\":\"boolean\"},\"temp\":{\"type\":\"number\"},\"tags\":{\"type\":"
    "\"array\"},\"opts\":{\"type\":\"object\"},\"x\":{\"type\":[\"string\",\"null\"]}}}}},"
    "{\"name\":\"bare\",\"parameters\":{\"properties\":{\"n\":{\"type\":\"integer\"}}}}]";

struct result {
    struct fz_buf content;
    struct fz_buf args[MAX_CALLS]; /* streamed ARGS per index */
    int n_start;
};

static void collect(struct result *r, const struct toolcall_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct toolcall_event *e = &ev[i];
        switch (e->type) {
        case TOOLCALL_EVENT_CONTENT:
            fz_buf_put(&r->content, e->text, e->len);
            break;
        case TOOLCALL_EVENT_START:
            if (e->index != r->n_start || !e->id || !e->name)
                __builtin_trap(); /* indexes start at 0 and count up */
            r->n_start++;
            break;
        case TOOLCALL_EVENT_ARGS:
            if (e->index < 0 || e->index >= r->n_start)
                __builtin_trap(); /* args for a call that never started */
            if (e->index < MAX_CALLS)
                fz_buf_put(&r->args[e->index], e->text, e->len);
            break;
        case TOOLCALL_EVENT_END:
            if (e->index < 0 || e->index >= r->n_start)
                __builtin_trap();
            break;
        }
    }
}

static struct toolcall *run(const char *tools, const char *text, size_t n, const size_t *cuts,
                            size_t n_cuts, struct result *r)
{
    struct toolcall *tc = toolcall_create(tools, 42);
    if (!tc)
        return NULL;
    const struct toolcall_event *ev;
    size_t n_ev, off = 0;
    for (size_t i = 0; i < n_cuts; i++) {
        toolcall_feed(tc, text + off, cuts[i], &ev, &n_ev);
        collect(r, ev, n_ev);
        off += cuts[i];
    }
    toolcall_flush(tc, &ev, &n_ev);
    collect(r, ev, n_ev);
    (void)n;
    return tc;
}

static void result_free(struct result *r)
{
    fz_buf_free(&r->content);
    for (int i = 0; i < MAX_CALLS; i++)
        fz_buf_free(&r->args[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint8_t flags = fz_u8(&f);
    size_t n_seed;
    const uint8_t *seed = fz_take(&f, FZ_SPLIT_MAX, &n_seed);
    char *tools = NULL;
    if (flags & 1) {
        size_t l;
        const uint8_t *p = fz_piece(&f, &l);
        tools = fz_strndup(p, l);
    }
    const char *use_tools = (flags & 1) ? tools : (flags & 2) ? NULL : TOOLS;
    const char *text = (const char *)f.p;
    size_t n = f.n;
    size_t cuts[4096 + 2], n_cuts;
    fz_split(seed, n_seed, n, cuts, &n_cuts, sizeof(cuts) / sizeof(cuts[0]));
    size_t whole = n;
    struct result *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    struct toolcall *t1 = run(use_tools, text, n, &whole, 1, a);
    struct toolcall *t2 = run(use_tools, text, n, cuts, n_cuts, b);
    if (!t1 != !t2)
        __builtin_trap();
    if (t1) {
        if (!fz_buf_eq(&a->content, &b->content) || a->n_start != b->n_start) {
            fprintf(stderr, "toolcall: split changed content (%zu vs %zu) or calls (%d vs %d)\n",
                    a->content.n, b->content.n, a->n_start, b->n_start);
            __builtin_trap();
        }
        int n1 = toolcall_count(t1), n2 = toolcall_count(t2);
        if (n1 != n2)
            __builtin_trap();
        for (int i = 0; i < n1; i++) {
            const char *id1, *nm1, *ar1, *id2, *nm2, *ar2;
            if (toolcall_get(t1, i, &id1, &nm1, &ar1) != 0 ||
                toolcall_get(t2, i, &id2, &nm2, &ar2) != 0)
                __builtin_trap();
            if (strcmp(id1, id2) || strcmp(nm1, nm2) || strcmp(ar1, ar2)) {
                fprintf(stderr, "toolcall: call %d differs: '%s' vs '%s'\n", i, ar1, ar2);
                __builtin_trap();
            }
            if (i < MAX_CALLS && i < a->n_start &&
                (a->args[i].n != strlen(ar1) ||
                 (a->args[i].n && memcmp(a->args[i].p, ar1, a->args[i].n) != 0))) {
                fprintf(stderr, "toolcall: streamed args of call %d != final '%s'\n", i, ar1);
                __builtin_trap();
            }
        }
    }
    toolcall_destroy(t1);
    toolcall_destroy(t2);
    result_free(a);
    result_free(b);
    free(a);
    free(b);
    free(tools);
    return 0;
}
