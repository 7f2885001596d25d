/* reasoning: "<think>" ... "</think>" splitter. A small state machine over a pending buffer: each
 * feed appends to pending and consumes as much as can be decided; an undecided tail (a prefix of a
 * tag) stays pending. */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "common/buf.h"
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
    struct buf pending;
    struct buf out_r, out_c;
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
    free(r->pending.data);
    free(r->out_r.data);
    free(r->out_c.data);
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
    struct buf *p = &r->pending;
    for (;;) {
        switch (r->state) {
        case RS_START: {
            size_t ol = strlen(TAG_OPEN);
            size_t k = p->len < ol ? p->len : ol;
            if (memcmp(p->data, TAG_OPEN, k) == 0 && k < ol && !at_end)
                return; /* still a prefix of "<think>" */
            if (k == ol && memcmp(p->data, TAG_OPEN, ol) == 0) {
                buf_consume(p, ol);
                r->state = RS_REASONING;
            } else {
                r->state = r->thinking ? RS_REASONING : RS_CONTENT;
            }
            continue;
        }
        case RS_REASONING: {
            char *c = memmem(p->data, p->len, TAG_CLOSE, strlen(TAG_CLOSE));
            char *t = memmem(p->data, p->len, TAG_TOOL, strlen(TAG_TOOL));
            if (c && (!t || c < t)) {
                buf_append(&r->out_r, p->data, (size_t)(c - p->data));
                buf_consume(p, (size_t)(c - p->data) + strlen(TAG_CLOSE));
                r->state = RS_CONTENT_LEAD;
                continue;
            }
            if (t) {
                buf_append(&r->out_r, p->data, (size_t)(t - p->data));
                buf_consume(p, (size_t)(t - p->data)); /* the tag starts the content */
                r->state = RS_CONTENT;
                continue;
            }
            size_t h1 = buf_match_tail(p, TAG_CLOSE);
            size_t h2 = buf_match_tail(p, TAG_TOOL);
            size_t h = at_end ? 0 : (h1 > h2 ? h1 : h2);
            buf_append(&r->out_r, p->data, p->len - h);
            buf_consume(p, p->len - h);
            return;
        }
        case RS_CONTENT_LEAD: {
            size_t i = 0;
            while (i < p->len && is_ws(p->data[i]))
                i++;
            buf_consume(p, i);
            if (p->len == 0)
                return;
            r->state = RS_CONTENT;
            continue;
        }
        case RS_CONTENT:
            buf_append(&r->out_c, p->data, p->len);
            p->len = 0;
            return;
        }
    }
}

static void emit(struct reasoning *r, struct reasoning_out *out)
{
    out->reasoning = r->out_r.data ? r->out_r.data : "";
    out->reasoning_len = r->out_r.len;
    out->content = r->out_c.data ? r->out_c.data : "";
    out->content_len = r->out_c.len;
}

void reasoning_feed(struct reasoning *r, const char *text, size_t len, struct reasoning_out *out)
{
    r->out_r.len = 0;
    r->out_c.len = 0;
    buf_append(&r->pending, text, len);
    run(r, false);
    emit(r, out);
}

void reasoning_flush(struct reasoning *r, struct reasoning_out *out)
{
    r->out_r.len = 0;
    r->out_c.len = 0;
    buf_append(&r->pending, "", 0);
    run(r, true);
    emit(r, out);
}
