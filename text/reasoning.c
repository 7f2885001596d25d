/* reasoning: "<think>" ... "</think>" splitter. A small state machine over a pending buffer: each
 * feed appends to pending and consumes as much as can be decided; an undecided tail (a prefix of a
 * tag) stays pending. */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "jbuf.h"
#include "text/reasoning.h"

#define TAG_OPEN "<think>"
#define TAG_CLOSE "</think>"
#define TAG_TOOL "<tool_call>"

enum rs_state {
    RS_START, /* nothing decided yet: a leading "<think>" may follow */
    RS_REASONING,
    RS_CONTENT_LEAD, /* after "</think>": dropping whitespace */
    RS_CONTENT,
};

struct reasoning {
    bool thinking;
    enum rs_state state;
    struct jbuf pending;
    struct jbuf out_r, out_c;
};

bool reasoning_prompt_opens_think(const char *prompt, size_t len)
{
    size_t ol = strlen(TAG_OPEN);
    if (!prompt || len < ol)
        return false;
    const char *open = NULL;
    for (const char *p = prompt; p + ol <= prompt + len;) {
        const char *hit = memmem(p, (size_t)(prompt + len - p), TAG_OPEN, ol);
        if (!hit)
            break;
        open = hit;
        p = hit + ol;
    }
    if (!open)
        return false;
    size_t rest = (size_t)(prompt + len - open);
    return memmem(open, rest, TAG_CLOSE, strlen(TAG_CLOSE)) == NULL;
}

struct reasoning *reasoning_create(bool thinking)
{
    struct reasoning *r = xcalloc(1, sizeof(*r));
    r->thinking = thinking;
    r->state = RS_START;
    return r;
}

void reasoning_destroy(struct reasoning *r)
{
    if (!r)
        return;
    free(r->pending.p);
    free(r->out_r.p);
    free(r->out_c.p);
    free(r);
}

bool reasoning_in_reasoning(const struct reasoning *r)
{
    return r->state == RS_REASONING || (r->state == RS_START && r->thinking);
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Process pending; at_end: no more input will come. */
static void run(struct reasoning *r, bool at_end)
{
    struct jbuf *p = &r->pending;
    for (;;) {
        switch (r->state) {
        case RS_START: {
            size_t ol = strlen(TAG_OPEN);
            size_t k = p->n < ol ? p->n : ol;
            if (memcmp(p->p, TAG_OPEN, k) == 0 && k < ol && !at_end)
                return; /* still a prefix of "<think>" */
            if (k == ol && memcmp(p->p, TAG_OPEN, ol) == 0) {
                jbuf_consume(p, ol);
                r->state = RS_REASONING;
            } else {
                r->state = r->thinking ? RS_REASONING : RS_CONTENT;
            }
            continue;
        }
        case RS_REASONING: {
            char *c = memmem(p->p, p->n, TAG_CLOSE, strlen(TAG_CLOSE));
            char *t = memmem(p->p, p->n, TAG_TOOL, strlen(TAG_TOOL));
            if (c && (!t || c < t)) {
                jbuf_put(&r->out_r, p->p, (size_t)(c - p->p));
                jbuf_consume(p, (size_t)(c - p->p) + strlen(TAG_CLOSE));
                r->state = RS_CONTENT_LEAD;
                continue;
            }
            if (t) {
                jbuf_put(&r->out_r, p->p, (size_t)(t - p->p));
                jbuf_consume(p, (size_t)(t - p->p)); /* the tag starts the content */
                r->state = RS_CONTENT;
                continue;
            }
            size_t h1 = jbuf_partial_tag(p, TAG_CLOSE);
            size_t h2 = jbuf_partial_tag(p, TAG_TOOL);
            size_t h = at_end ? 0 : (h1 > h2 ? h1 : h2);
            jbuf_put(&r->out_r, p->p, p->n - h);
            jbuf_consume(p, p->n - h);
            return;
        }
        case RS_CONTENT_LEAD: {
            size_t i = 0;
            while (i < p->n && is_ws(p->p[i]))
                i++;
            jbuf_consume(p, i);
            if (p->n == 0)
                return;
            r->state = RS_CONTENT;
            continue;
        }
        case RS_CONTENT:
            jbuf_put(&r->out_c, p->p, p->n);
            p->n = 0;
            return;
        }
    }
}

static void emit(struct reasoning *r, struct reasoning_out *out)
{
    out->reasoning = r->out_r.p ? r->out_r.p : "";
    out->reasoning_len = r->out_r.n;
    out->content = r->out_c.p ? r->out_c.p : "";
    out->content_len = r->out_c.n;
}

void reasoning_feed(struct reasoning *r, const char *text, size_t len, struct reasoning_out *out)
{
    r->out_r.n = 0;
    r->out_c.n = 0;
    jbuf_put(&r->pending, text, len);
    run(r, false);
    emit(r, out);
}

void reasoning_flush(struct reasoning *r, struct reasoning_out *out)
{
    r->out_r.n = 0;
    r->out_c.n = 0;
    jbuf_put(&r->pending, "", 0);
    run(r, true);
    emit(r, out);
}
