/* gw_out: chains the text library's streaming stages; each stage's output feeds the next. */
#include "gw_out.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "gw_text.h"
#include "text/detok.h"
#include "text/reasoning.h"
#include "text/stop.h"
#include "text/tokenizer.h"
#include "text/toolcall.h"

void gw_out_delta_init(struct gw_out_delta *d)
{
    memset(d, 0, sizeof(*d));
    buf_init(&d->reasoning);
    buf_init(&d->content);
    for (int i = 0; i < GW_OUT_TOOL_EVS_MAX; i++)
        buf_init(&d->tools[i].args);
}

void gw_out_delta_reset(struct gw_out_delta *d)
{
    buf_reset(&d->reasoning);
    buf_reset(&d->content);
    for (int i = 0; i < d->n_tools; i++) {
        buf_reset(&d->tools[i].args);
        d->tools[i].id[0] = '\0';
        d->tools[i].name[0] = '\0';
    }
    d->n_tools = 0;
}

void gw_out_delta_deinit(struct gw_out_delta *d)
{
    buf_deinit(&d->reasoning);
    buf_deinit(&d->content);
    for (int i = 0; i < GW_OUT_TOOL_EVS_MAX; i++)
        buf_deinit(&d->tools[i].args);
}

bool gw_out_delta_is_empty(const struct gw_out_delta *d)
{
    return d->reasoning.len == 0 && d->content.len == 0 && d->n_tools == 0;
}

int gw_out_init(struct gw_out *o, const struct gw_text *text, const char *const *stop, int n_stop,
                bool reasoning, bool thinking, const char *tools_json, uint64_t seed)
{
    memset(o, 0, sizeof(*o));
    o->text = text;
    if (text) {
        o->detok = detok_create(gw_text_tokenizer(text), TOKENIZER_DECODE_SKIP_SPECIAL);
        if (!o->detok)
            goto fail;
    }
    o->stop = stop_create(stop, (size_t)(n_stop > 0 ? n_stop : 0));
    if (!o->stop)
        goto fail;
    if (reasoning) {
        o->rs = reasoning_create(thinking);
        if (!o->rs)
            goto fail;
    }
    if (tools_json) {
        o->tc = toolcall_create(tools_json, seed);
        if (!o->tc)
            goto fail;
    }
    return 0;
fail:
    gw_out_deinit(o);
    return ERR_INVAL;
}

void gw_out_deinit(struct gw_out *o)
{
    toolcall_destroy(o->tc);
    reasoning_destroy(o->rs);
    stop_destroy(o->stop);
    detok_destroy(o->detok);
    memset(o, 0, sizeof(*o));
}

static struct gw_out_tool_ev *tool_ev(struct gw_out_delta *d, int index, bool start)
{
    /* merge into the last entry for the same call unless a new start begins */
    if (!start && d->n_tools > 0 && d->tools[d->n_tools - 1].index == index)
        return &d->tools[d->n_tools - 1];
    if (d->n_tools == GW_OUT_TOOL_EVS_MAX)
        return &d->tools[d->n_tools - 1]; /* bounded: later pieces append to the last entry */
    struct gw_out_tool_ev *t = &d->tools[d->n_tools++];
    t->index = index;
    t->id[0] = '\0';
    t->name[0] = '\0';
    buf_reset(&t->args);
    return t;
}

static void content_stage(struct gw_out *o, struct gw_out_delta *d, const char *s, size_t n,
                          bool final)
{
    if (!o->tc) {
        buf_append(&d->content, s, n);
        return;
    }
    const struct toolcall_event *ev = NULL;
    size_t n_ev = 0;
    if (n)
        toolcall_feed(o->tc, s, n, &ev, &n_ev);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n_ev; i++) {
            const struct toolcall_event *e = &ev[i];
            struct gw_out_tool_ev *t;
            if (o->tools_max > 0 && e->index >= o->tools_max && e->type != TOOLCALL_EVENT_CONTENT)
                continue; /* parallel_tool_calls false: only the first call */
            switch (e->type) {
            case TOOLCALL_EVENT_CONTENT:
                buf_append(&d->content, e->text, e->len);
                break;
            case TOOLCALL_EVENT_START:
                t = tool_ev(d, e->index, true);
                snprintf(t->id, sizeof(t->id), "%s", e->id);
                snprintf(t->name, sizeof(t->name), "%s", e->name);
                break;
            case TOOLCALL_EVENT_ARGS:
                t = tool_ev(d, e->index, false);
                buf_append(&t->args, e->text, e->len);
                break;
            case TOOLCALL_EVENT_END:
                break;
            }
        }
        if (!final || pass == 1)
            break;
        toolcall_flush(o->tc, &ev, &n_ev);
    }
}

static void text_stage(struct gw_out *o, struct gw_out_delta *d, const char *s, size_t n,
                       bool final)
{
    if (!o->rs) {
        content_stage(o, d, s, n, final);
        return;
    }
    struct reasoning_out ro = {0};
    if (n) {
        reasoning_feed(o->rs, s, n, &ro);
        buf_append(&d->reasoning, ro.reasoning, ro.reasoning_len);
        content_stage(o, d, ro.content, ro.content_len, false);
    }
    if (final) {
        memset(&ro, 0, sizeof(ro));
        reasoning_flush(o->rs, &ro);
        buf_append(&d->reasoning, ro.reasoning, ro.reasoning_len);
        content_stage(o, d, ro.content, ro.content_len, true);
    }
}

static void stop_stage(struct gw_out *o, struct gw_out_delta *d, const char *s, size_t n)
{
    const char *out = NULL;
    size_t len = 0;
    if (o->stopped || n == 0)
        return;
    if (o->n_tokens <= o->stop_after) { /* min_tokens not reached: no stop string yet */
        text_stage(o, d, s, n, false);
        return;
    }
    o->stopped = stop_feed(o->stop, s, n, &out, &len);
    text_stage(o, d, out, len, false);
}

bool gw_out_feed(struct gw_out *o, const int32_t *ids, size_t n, struct gw_out_delta *d)
{
    for (size_t i = 0; i < n && !o->stopped; i++) {
        o->n_tokens++;
        if (!o->text) {
            char ch = (char)(ids[i] & 0xff);
            stop_stage(o, d, &ch, 1);
            continue;
        }
        const char *t = NULL;
        size_t len = 0;
        if (detok_feed(o->detok, ids[i], &t, &len) == 0)
            stop_stage(o, d, t, len);
        /* an unknown id (ERR_RANGE) produces no text */
    }
    return o->stopped;
}

void gw_out_flush(struct gw_out *o, struct gw_out_delta *d)
{
    const char *t = NULL;
    size_t len = 0;
    if (!o->stopped && o->detok && detok_flush(o->detok, &t, &len) == 0)
        stop_stage(o, d, t, len);
    if (!o->stopped) {
        stop_flush(o->stop, &t, &len);
        text_stage(o, d, t, len, true);
    } else {
        text_stage(o, d, "", 0, true);
    }
}

int gw_out_stop_index(const struct gw_out *o)
{
    return o->stopped ? stop_matched(o->stop) : -1;
}

int gw_out_tool_count(const struct gw_out *o)
{
    int n = o->tc ? toolcall_count(o->tc) : 0;
    return o->tools_max > 0 && n > o->tools_max ? o->tools_max : n;
}

int gw_out_tool_get(const struct gw_out *o, int i, const char **id, const char **name,
                    const char **arguments)
{
    return o->tc ? toolcall_get(o->tc, i, id, name, arguments) : -1;
}
