/* toolcall: streaming tool-call parser (qwen3_coder XML and hermes JSON inside <tool_call>).
 * A state machine over a pending buffer: each feed appends to pending and consumes what can be
 * decided; an undecided tail (a tag prefix, an unfinished parameter value) stays pending. Events
 * are collected per call into one text buffer and handed out as an array. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "common/xalloc.h"
#include "common/buf.h"
#include "text/toolcall.h"

#define T_CALL "<tool_call>"
#define T_CALL_END "</tool_call>"
#define T_FUNC "<function="
#define T_FUNC_END "</function>"
#define T_PARAM "<parameter="
#define T_PARAM_END "</parameter>"
#define NAME_MAX_BYTES 512

enum tc_state {
    TC_TEXT,   /* plain content, watching for <tool_call> */
    TC_FMT,    /* after <tool_call>: which format? */
    TC_HERMES, /* JSON body until </tool_call> */
    TC_BAD,    /* unparseable block: skip to </tool_call> */
    TC_NAME,   /* after <function=: name until '>' */
    TC_BODY,   /* inside <function>: parameters or the closing tags */
    TC_VALUE,  /* inside <parameter=K>: value until </parameter> */
    TC_AFTER,  /* after </function>: expecting </tool_call> */
};

struct tc_call {
    char id[32];
    char *name;
    struct buf args;
};

struct tc_ev {
    enum toolcall_event_type type;
    int index;
    size_t off, len; /* into evtext */
};

struct toolcall {
    cJSON *tools;
    uint64_t seed;
    enum tc_state state;
    struct buf pending;
    struct buf ws_held; /* trailing whitespace of content, not yet emitted */
    bool strip_lead;     /* drop whitespace at the start of content (after a call) */
    struct tc_call **calls;
    int n_calls, cap_calls;
    int n_params;      /* parameters emitted in the current qwen3_coder call */
    char *param_key;   /* current parameter name */
    bool value_stream; /* current value is a string streamed as it arrives */
    bool value_lead;   /* streamed value: its first byte (a newline to drop) not seen yet */
    size_t scanned;    /* pending bytes already searched for a terminator (HERMES/VALUE) */
    struct tc_ev *evs;
    size_t n_evs, cap_evs;
    struct buf evtext;
    struct toolcall_event *out;
    size_t cap_out;
};

// ---- buffers ----

static bool is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static bool starts_with(const struct buf *b, const char *tag)
{
    size_t l = strlen(tag);
    return b->len >= l && memcmp(b->data, tag, l) == 0;
}

/* b is shorter than tag and a prefix of it (more input may complete the tag). */
static bool is_proper_prefix(const struct buf *b, const char *tag)
{
    size_t l = strlen(tag);
    return b->len < l && memcmp(b->data, tag, b->len) == 0;
}

static void skip_ws(struct buf *b)
{
    size_t i = 0;
    while (i < b->len && is_ws(b->data[i]))
        i++;
    buf_consume(b, i);
}

// ---- events ----

static void ev_push(struct toolcall *tc, enum toolcall_event_type type, int index, const char *s,
                    size_t n)
{
    if (type == TOOLCALL_EVENT_CONTENT && n == 0)
        return;
    struct tc_ev *last = tc->n_evs ? &tc->evs[tc->n_evs - 1] : NULL;
    if (last && last->type == type && type != TOOLCALL_EVENT_START && type != TOOLCALL_EVENT_END &&
        last->index == index && last->off + last->len == tc->evtext.len) {
        buf_append(&tc->evtext, s, n);
        last->len += n;
        return;
    }
    if (tc->n_evs == tc->cap_evs) {
        tc->cap_evs = tc->cap_evs ? tc->cap_evs * 2 : 16;
        tc->evs = xrealloc(tc->evs, tc->cap_evs * sizeof(*tc->evs));
    }
    tc->evs[tc->n_evs++] = (struct tc_ev){type, index, tc->evtext.len, n};
    buf_append(&tc->evtext, s, n);
}

static void args_emit(struct toolcall *tc, const char *s, size_t n)
{
    struct tc_call *c = tc->calls[tc->n_calls - 1];
    buf_append(&c->args, s, n);
    ev_push(tc, TOOLCALL_EVENT_ARGS, tc->n_calls - 1, s, n);
}

// ---- content with whitespace rules ----

static void content_text(struct toolcall *tc, const char *s, size_t n)
{
    if (tc->strip_lead) {
        while (n && is_ws(*s)) {
            s++;
            n--;
        }
        if (!n)
            return;
        tc->strip_lead = false;
    }
    size_t body = n;
    while (body && is_ws(s[body - 1]))
        body--;
    if (body == 0) {
        buf_append(&tc->ws_held, s, n);
        return;
    }
    ev_push(tc, TOOLCALL_EVENT_CONTENT, 0, tc->ws_held.data, tc->ws_held.len);
    ev_push(tc, TOOLCALL_EVENT_CONTENT, 0, s, body);
    tc->ws_held.len = 0;
    buf_append(&tc->ws_held, s + body, n - body);
}

// ---- calls ----

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void call_start(struct toolcall *tc, const char *name, size_t n)
{
    if (tc->n_calls == tc->cap_calls) {
        tc->cap_calls = tc->cap_calls ? tc->cap_calls * 2 : 4;
        tc->calls = xrealloc(tc->calls, (size_t)tc->cap_calls * sizeof(*tc->calls));
    }
    struct tc_call *c = xcalloc(1, sizeof(*c));
    uint64_t x = tc->seed ^ ((uint64_t)tc->n_calls * 0xD1B54A32D192ED03ull);
    uint64_t a = splitmix(&x), b = splitmix(&x);
    snprintf(c->id, sizeof(c->id), "call_%016llx%08llx", (unsigned long long)a,
             (unsigned long long)(b >> 32));
    c->name = xstrndup(name, n);
    buf_append(&c->args, "", 0);
    tc->calls[tc->n_calls++] = c;
    tc->n_params = 0;
    ev_push(tc, TOOLCALL_EVENT_START, tc->n_calls - 1, "", 0);
}

static void call_end(struct toolcall *tc)
{
    args_emit(tc, tc->n_params ? "}" : "{}", tc->n_params ? 1 : 2);
    ev_push(tc, TOOLCALL_EVENT_END, tc->n_calls - 1, "", 0);
    tc->n_params = 0;
}

// ---- schema typing ----

static const cJSON *find_param_schema(const struct toolcall *tc, const char *fn, const char *key)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tc->tools)
    {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!cJSON_IsObject(f))
            f = t;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, fn) != 0)
            continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
        return cJSON_GetObjectItemCaseSensitive(props, key);
    }
    return NULL;
}

/* JSON string body of s[0..n): escapes '"', '\\' and control characters; other bytes as is. */
static void json_escape(struct buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        switch (c) {
        case '"':
            buf_append(b, "\\\"", 2);
            break;
        case '\\':
            buf_append(b, "\\\\", 2);
            break;
        case '\b':
            buf_append(b, "\\b", 2);
            break;
        case '\f':
            buf_append(b, "\\f", 2);
            break;
        case '\n':
            buf_append(b, "\\n", 2);
            break;
        case '\r':
            buf_append(b, "\\r", 2);
            break;
        case '\t':
            buf_append(b, "\\t", 2);
            break;
        default:
            if (c < 0x20) {
                snprintf(e, sizeof(e), "\\u%04x", c);
                buf_append(b, e, 6);
            } else {
                buf_append(b, (const char *)&s[i], 1);
            }
        }
    }
}

static char *json_string(const char *s, size_t n)
{
    struct buf b = {0};
    buf_append(&b, "\"", 1);
    json_escape(&b, s, n);
    buf_append(&b, "\"", 1);
    return b.data;
}

static bool is_json_integer(const char *s)
{
    if (*s == '-')
        s++;
    if (!*s || (s[0] == '0' && s[1]))
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* Strict JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool is_json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return false;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* Value text as JSON of the given schema type, or NULL when it does not parse as that type. */
static char *convert_as(const char *type, const char *v)
{
    if (strcmp(type, "string") == 0)
        return json_string(v, strlen(v));
    if (strcmp(type, "integer") == 0)
        return is_json_integer(v) ? xstrdup(v) : NULL;
    if (strcmp(type, "boolean") == 0) {
        if (strcasecmp(v, "true") == 0)
            return xstrdup("true");
        if (strcasecmp(v, "false") == 0)
            return xstrdup("false");
        return NULL;
    }
    if (strcmp(type, "null") == 0)
        return strcasecmp(v, "null") == 0 || strcmp(v, "None") == 0 ? xstrdup("null") : NULL;
    if (strcmp(type, "number") == 0)
        return is_json_number(v) ? xstrdup(v) : NULL;
    bool obj = strcmp(type, "object") == 0, arr = strcmp(type, "array") == 0;
    if (!obj && !arr)
        return NULL;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(v, &end, true);
    char *out = NULL;
    if (j && ((obj && cJSON_IsObject(j)) || (arr && cJSON_IsArray(j))))
        out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}

static void collect_types(const cJSON *schema, const char **types, int *n, int max)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(schema, "type");
    if (cJSON_IsString(t) && *n < max)
        types[(*n)++] = t->valuestring;
    const cJSON *e;
    if (cJSON_IsArray(t)) {
        cJSON_ArrayForEach(e, t)
        {
            if (cJSON_IsString(e) && *n < max)
                types[(*n)++] = e->valuestring;
        }
    }
    static const char *const combos[] = {"anyOf", "oneOf"};
    for (size_t c = 0; c < 2; c++)
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(schema, combos[c]))
            collect_types(e, types, n, max);
}

static char *convert_value(const struct toolcall *tc, const char *fn, const char *key,
                           const char *raw, size_t n)
{
    const cJSON *schema = tc->tools ? find_param_schema(tc, fn, key) : NULL;
    const char *types[8];
    int nt = 0;
    if (schema)
        collect_types(schema, types, &nt, 8);
    if (nt == 0)
        return json_string(raw, n);
    char *trimmed;
    {
        size_t a = 0, b = n;
        while (a < b && is_ws(raw[a]))
            a++;
        while (b > a && is_ws(raw[b - 1]))
            b--;
        trimmed = xstrndup(raw + a, b - a);
    }
    char *out = NULL;
    for (int i = 0; i < nt && !out; i++)
        out = strcmp(types[i], "string") == 0 ? json_string(raw, n) : convert_as(types[i], trimmed);
    free(trimmed);
    return out ? out : json_string(raw, n);
}

/* A parameter whose schema says plain string (or that has no schema) is streamed as it comes. */
static bool param_is_string(const struct toolcall *tc, const char *fn, const char *key)
{
    const cJSON *schema = tc->tools ? find_param_schema(tc, fn, key) : NULL;
    const char *types[8];
    int nt = 0;
    if (schema)
        collect_types(schema, types, &nt, 8);
    return nt == 0 || (nt == 1 && strcmp(types[0], "string") == 0);
}

/* '{"key": ' or ', "key": ' */
static void emit_key(struct toolcall *tc)
{
    char *jk = json_string(tc->param_key, strlen(tc->param_key));
    args_emit(tc, tc->n_params ? ", " : "{", tc->n_params ? 2 : 1);
    args_emit(tc, jk, strlen(jk));
    args_emit(tc, ": ", 2);
    tc->n_params++;
    free(jk);
}

/* Length of v[0..n) without one trailing "\n" or "\r\n". */
static size_t strip_trailing_newline(const char *v, size_t n)
{
    if (n && v[n - 1] == '\n') {
        n--;
        if (n && v[n - 1] == '\r')
            n--;
    }
    return n;
}

static void emit_escaped(struct toolcall *tc, const char *v, size_t n)
{
    struct buf b = {0};
    buf_append(&b, "", 0);
    json_escape(&b, v, n);
    args_emit(tc, b.data, b.len);
    free(b.data);
}

/* A complete typed (not streamed) value. */
static void emit_param(struct toolcall *tc, const char *v, size_t n)
{
    /* the format puts the value on its own lines: drop one leading and one trailing newline */
    if (n && v[0] == '\n') {
        v++;
        n--;
    }
    n = strip_trailing_newline(v, n);
    const char *fn = tc->calls[tc->n_calls - 1]->name;
    char *jv = convert_value(tc, fn, tc->param_key, v, n);
    emit_key(tc);
    args_emit(tc, jv, strlen(jv));
    free(jv);
}

/* hermes: {"name": ..., "arguments": {...}} ; returns false when unusable */
static bool emit_hermes(struct toolcall *tc, const char *s, size_t n)
{
    cJSON *j = cJSON_ParseWithLength(s, n);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (!cJSON_IsObject(j) || !cJSON_IsString(name) || !name->valuestring[0]) {
        cJSON_Delete(j);
        return false;
    }
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
    if (!args)
        args = cJSON_GetObjectItemCaseSensitive(j, "parameters");
    char *a = NULL;
    if (cJSON_IsString(args))
        a = xstrdup(args->valuestring);
    else if (args && !cJSON_IsNull(args))
        a = cJSON_PrintUnformatted(args);
    call_start(tc, name->valuestring, strlen(name->valuestring));
    args_emit(tc, a ? a : "{}", a ? strlen(a) : 2);
    ev_push(tc, TOOLCALL_EVENT_END, tc->n_calls - 1, "", 0);
    free(a);
    cJSON_Delete(j);
    return true;
}

// ---- the state machine ----

static void leave_block(struct toolcall *tc)
{
    tc->state = TC_TEXT;
    tc->strip_lead = true;
    tc->ws_held.len = 0;
}

/* Returns false when it needs more input. */
static bool step(struct toolcall *tc, bool at_end)
{
    struct buf *p = &tc->pending;
    switch (tc->state) {
    case TC_TEXT: {
        char *t = memmem(p->data, p->len, T_CALL, strlen(T_CALL));
        if (t) {
            content_text(tc, p->data, (size_t)(t - p->data));
            tc->ws_held.len = 0; /* whitespace before a call is dropped */
            buf_consume(p, (size_t)(t - p->data) + strlen(T_CALL));
            tc->state = TC_FMT;
            return true;
        }
        size_t h = at_end ? 0 : buf_match_tail(p, T_CALL);
        content_text(tc, p->data, p->len - h);
        buf_consume(p, p->len - h);
        return false;
    }
    case TC_FMT:
        skip_ws(p);
        if (p->len == 0)
            return false;
        if (p->data[0] == '{') {
            tc->state = TC_HERMES;
            tc->scanned = 0;
            return true;
        }
        if (starts_with(p, T_FUNC)) {
            buf_consume(p, strlen(T_FUNC));
            tc->state = TC_NAME;
            return true;
        }
        if (is_proper_prefix(p, T_FUNC))
            return false;
        tc->state = TC_BAD;
        tc->scanned = 0;
        return true;
    case TC_HERMES:
    case TC_BAD: {
        char *e = memmem(p->data + tc->scanned, p->len - tc->scanned, T_CALL_END,
                         strlen(T_CALL_END));
        if (!e) {
            size_t h = buf_match_tail(p, T_CALL_END);
            if (tc->state == TC_BAD) {
                buf_consume(p, p->len - h); /* skipped text is not kept */
                tc->scanned = 0;
            } else {
                tc->scanned = p->len - h;
            }
            return false;
        }
        if (tc->state == TC_HERMES)
            (void)emit_hermes(tc, p->data, (size_t)(e - p->data)); /* false: block dropped */
        buf_consume(p, (size_t)(e - p->data) + strlen(T_CALL_END));
        leave_block(tc);
        return true;
    }
    case TC_NAME: {
        char *gt = memchr(p->data, '>', p->len);
        if (!gt) {
            if (p->len <= NAME_MAX_BYTES)
                return false;
            tc->state = TC_BAD;
            tc->scanned = 0;
            return true;
        }
        size_t a = 0, b = (size_t)(gt - p->data);
        /* same limit as above, on the same raw length, so that the outcome does not depend
         * on whether the '>' came in the same delta */
        if (b > NAME_MAX_BYTES) {
            tc->state = TC_BAD;
            tc->scanned = 0;
            return true;
        }
        while (a < b && is_ws(p->data[a]))
            a++;
        while (b > a && is_ws(p->data[b - 1]))
            b--;
        if (a == b) {
            tc->state = TC_BAD;
            tc->scanned = 0;
            return true;
        }
        call_start(tc, p->data + a, b - a);
        buf_consume(p, (size_t)(gt - p->data) + 1);
        tc->state = TC_BODY;
        return true;
    }
    case TC_BODY:
        skip_ws(p);
        if (p->len == 0)
            return false;
        if (starts_with(p, T_PARAM)) {
            char *gt = memchr(p->data, '>', p->len);
            if (!gt)
                return false;
            size_t kl = (size_t)(gt - p->data) - strlen(T_PARAM);
            free(tc->param_key);
            tc->param_key = xstrndup(p->data + strlen(T_PARAM), kl);
            buf_consume(p, (size_t)(gt - p->data) + 1);
            tc->state = TC_VALUE;
            tc->scanned = 0;
            tc->value_stream = param_is_string(tc, tc->calls[tc->n_calls - 1]->name, tc->param_key);
            tc->value_lead = tc->value_stream;
            if (tc->value_stream) {
                emit_key(tc);
                args_emit(tc, "\"", 1);
            }
            return true;
        }
        if (starts_with(p, T_FUNC_END)) {
            buf_consume(p, strlen(T_FUNC_END));
            call_end(tc);
            tc->state = TC_AFTER;
            return true;
        }
        if (starts_with(p, T_CALL_END)) {
            buf_consume(p, strlen(T_CALL_END));
            call_end(tc);
            leave_block(tc);
            return true;
        }
        if (is_proper_prefix(p, T_PARAM) || is_proper_prefix(p, T_FUNC_END) ||
            is_proper_prefix(p, T_CALL_END))
            return false;
        {
            /* stray text inside <function>: skip it up to the next '<' */
            char *lt = memchr(p->data + 1, '<', p->len - 1);
            buf_consume(p, lt ? (size_t)(lt - p->data) : p->len);
        }
        return true;
    case TC_VALUE: {
        static const char *const ends[] = {T_PARAM_END, T_FUNC_END, T_CALL_END};
        if (tc->value_lead) {
            if (p->len == 0)
                return false;
            if (p->data[0] == '\n')
                buf_consume(p, 1);
            tc->value_lead = false;
        }
        char *best = NULL;
        size_t which = 0;
        for (size_t i = 0; i < 3; i++) {
            char *e = memmem(p->data + tc->scanned, p->len - tc->scanned, ends[i], strlen(ends[i]));
            if (e && (!best || e < best)) {
                best = e;
                which = i;
            }
        }
        if (!best) {
            size_t hold = 0;
            for (size_t i = 0; i < 3; i++) {
                size_t h = buf_match_tail(p, ends[i]);
                hold = h > hold ? h : hold;
            }
            if (!tc->value_stream) {
                tc->scanned = p->len - hold;
                return false;
            }
            /* stream what cannot be part of a terminator or of the final newline */
            size_t safe = p->len - hold;
            if (safe && p->data[safe - 1] == '\n')
                safe--;
            if (safe && p->data[safe - 1] == '\r')
                safe--;
            emit_escaped(tc, p->data, safe);
            buf_consume(p, safe);
            tc->scanned = 0;
            return false;
        }
        size_t vl = (size_t)(best - p->data);
        if (tc->value_stream) {
            emit_escaped(tc, p->data, strip_trailing_newline(p->data, vl));
            args_emit(tc, "\"", 1);
        } else {
            emit_param(tc, p->data, vl);
        }
        buf_consume(p, vl + (which == 0 ? strlen(T_PARAM_END) : 0));
        tc->state = TC_BODY;
        return true;
    }
    case TC_AFTER:
        skip_ws(p);
        if (p->len == 0)
            return false;
        if (starts_with(p, T_CALL_END)) {
            buf_consume(p, strlen(T_CALL_END));
            leave_block(tc);
            return true;
        }
        if (starts_with(p, T_FUNC)) {
            buf_consume(p, strlen(T_FUNC));
            tc->state = TC_NAME;
            return true;
        }
        if (is_proper_prefix(p, T_CALL_END) || is_proper_prefix(p, T_FUNC))
            return false;
        leave_block(tc); /* unterminated block: what follows is content */
        return true;
    }
    return false;
}

static void finish(struct toolcall *tc)
{
    struct buf *p = &tc->pending;
    switch (tc->state) {
    case TC_TEXT:
        break;
    case TC_HERMES:
        (void)emit_hermes(tc, p->data, p->len); /* an unclosed but complete JSON still counts */
        break;
    case TC_VALUE:
        if (tc->value_stream) { /* already partly sent: finish the string */
            emit_escaped(tc, p->data, strip_trailing_newline(p->data, p->len));
            args_emit(tc, "\"", 1);
        } /* an unfinished typed value is dropped */
        call_end(tc);
        break;
    case TC_BODY:
        call_end(tc);
        break;
    default:
        break;
    }
    p->len = 0;
    tc->state = TC_TEXT;
    if (tc->n_calls == 0)
        ev_push(tc, TOOLCALL_EVENT_CONTENT, 0, tc->ws_held.data, tc->ws_held.len);
    tc->ws_held.len = 0;
}

static void hand_out(struct toolcall *tc, const struct toolcall_event **ev, size_t *n_ev)
{
    if (tc->n_evs > tc->cap_out) {
        tc->cap_out = tc->n_evs * 2;
        tc->out = xrealloc(tc->out, tc->cap_out * sizeof(*tc->out));
    }
    for (size_t i = 0; i < tc->n_evs; i++) {
        const struct tc_ev *e = &tc->evs[i];
        struct toolcall_event *o = &tc->out[i];
        o->type = e->type;
        o->index = e->index;
        o->text = tc->evtext.data + e->off;
        o->len = e->len;
        o->id = e->type == TOOLCALL_EVENT_START ? tc->calls[e->index]->id : NULL;
        o->name = e->type == TOOLCALL_EVENT_START ? tc->calls[e->index]->name : NULL;
    }
    *ev = tc->out;
    *n_ev = tc->n_evs;
}

void toolcall_feed(struct toolcall *tc, const char *text, size_t len,
                   const struct toolcall_event **ev, size_t *n_ev)
{
    tc->n_evs = 0;
    tc->evtext.len = 0;
    buf_append(&tc->pending, text, len);
    while (step(tc, false))
        ;
    hand_out(tc, ev, n_ev);
}

void toolcall_flush(struct toolcall *tc, const struct toolcall_event **ev, size_t *n_ev)
{
    tc->n_evs = 0;
    tc->evtext.len = 0;
    buf_append(&tc->pending, "", 0);
    while (step(tc, true))
        ;
    finish(tc);
    hand_out(tc, ev, n_ev);
}

// ---- lifecycle and accessors ----

struct toolcall *toolcall_create(const char *tools_json, uint64_t seed)
{
    cJSON *tools = NULL;
    if (tools_json) {
        tools = cJSON_Parse(tools_json);
        if (!tools)
            return NULL;
    }
    struct toolcall *tc = xcalloc(1, sizeof(*tc));
    tc->tools = tools;
    tc->seed = seed;
    tc->state = TC_TEXT;
    buf_append(&tc->pending, "", 0);
    buf_append(&tc->evtext, "", 0);
    buf_append(&tc->ws_held, "", 0);
    return tc;
}

void toolcall_destroy(struct toolcall *tc)
{
    if (!tc)
        return;
    for (int i = 0; i < tc->n_calls; i++) {
        free(tc->calls[i]->name);
        free(tc->calls[i]->args.data);
        free(tc->calls[i]);
    }
    free(tc->calls);
    cJSON_Delete(tc->tools);
    free(tc->pending.data);
    free(tc->ws_held.data);
    free(tc->param_key);
    free(tc->evs);
    free(tc->evtext.data);
    free(tc->out);
    free(tc);
}

int toolcall_count(const struct toolcall *tc)
{
    return tc->n_calls;
}

int toolcall_get(const struct toolcall *tc, int i, const char **id, const char **name,
                 const char **arguments)
{
    if (i < 0 || i >= tc->n_calls)
        return -1;
    *id = tc->calls[i]->id;
    *name = tc->calls[i]->name;
    *arguments = tc->calls[i]->args.data;
    return 0;
}
