/* gw_req: JSON body -> struct gw_req, validating every parameter of ECOSYSTEM.md §A.2 marked M.
 * Unknown fields are ignored (gw_req_unknown_fields names them for a warning line); null counts
 * as absent. Ranges follow vLLM/OpenAI. Every top-level field read is in known[] and in
 * docs/API.md's field list (test_api_fields checks both). */
#include "gw_req.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "gw_arena.h"
#include "text/grammar.h"
#include "text/grammar_tools.h"

static int fail(struct gw_req_err *err, int status, const char *param, const char *code,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

int gw_req_err_vset(struct gw_req_err *err, int status, const char *param, const char *code,
                    const char *fmt, va_list ap)
{
    err->status = status;
    err->type = "invalid_request_error";
    err->param = param;
    err->code = code;
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    return ERR_INVAL;
}

static int fail(struct gw_req_err *err, int status, const char *param, const char *code,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = gw_req_err_vset(err, status, param, code, fmt, ap);
    va_end(ap);
    return rc;
}

void gw_req_free_json(void *p)
{
    cJSON_Delete(p);
}

struct cJSON *gw_req_field(const struct cJSON *obj, const char *name)
{
    cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, name);
    return (it && !cJSON_IsNull(it)) ? it : NULL;
}

static int get_bool(const cJSON *obj, const char *name, bool *out, struct gw_req_err *err)
{
    cJSON *it = gw_req_field(obj, name);
    if (!it)
        return 0;
    if (!cJSON_IsBool(it))
        return fail(err, 400, name, NULL, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(it);
    return 0;
}

/* number in [lo, hi]; lo_open/hi_open make that end exclusive */
static int get_num(const cJSON *obj, const char *name, double lo, bool lo_open, double hi,
                   bool hi_open, double *out, struct gw_req_err *err)
{
    cJSON *it = gw_req_field(obj, name);
    if (!it)
        return 0;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return fail(err, 400, name, NULL, "'%s' must be a number", name);
    double v = it->valuedouble;
    if ((lo_open ? v <= lo : v < lo) || (hi_open ? v >= hi : v > hi))
        return fail(err, 400, name, NULL, "'%s' must be in %s%g, %g%s, got %g", name,
                    lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]", v);
    *out = v;
    return 0;
}

static int get_int(const cJSON *obj, const char *name, int64_t lo, int64_t hi, bool *present,
                   int64_t *out, struct gw_req_err *err)
{
    cJSON *it = gw_req_field(obj, name);
    if (present)
        *present = it != NULL;
    if (!it)
        return 0;
    double v = it->valuedouble;
    if (!cJSON_IsNumber(it) || !isfinite(v) || v != floor(v) || fabs(v) > 9.2e18)
        return fail(err, 400, name, NULL, "'%s' must be an integer", name);
    if (v < (double)lo || v > (double)hi)
        return fail(err, 400, name, NULL, "'%s' must be in [%lld, %lld], got %.0f", name,
                    (long long)lo, (long long)hi, v);
    *out = (int64_t)v;
    return 0;
}

static int parse_stop(struct gw_req *r, const cJSON *root, struct gw_arena *a,
                      struct gw_req_err *err)
{
    cJSON *it = gw_req_field(root, "stop");
    if (!it)
        return 0;
    if (cJSON_IsString(it)) {
        if (it->valuestring[0] == '\0')
            return 0;
        if (strlen(it->valuestring) > GW_REQ_STOP_LEN_MAX)
            return fail(err, 400, "stop", NULL, "stop string longer than %d bytes",
                        GW_REQ_STOP_LEN_MAX);
        r->stop[r->n_stop++] = gw_arena_strdup(a, it->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(it))
        return fail(err, 400, "stop", NULL, "'stop' must be a string or a list of strings");
    int n = cJSON_GetArraySize(it);
    if (n > GW_REQ_STOP_MAX)
        return fail(err, 400, "stop", NULL, "at most %d stop strings are allowed, got %d",
                    GW_REQ_STOP_MAX, n);
    cJSON *s;
    cJSON_ArrayForEach(s, it)
    {
        if (!cJSON_IsString(s))
            return fail(err, 400, "stop", NULL, "'stop' must be a string or a list of strings");
        if (strlen(s->valuestring) > GW_REQ_STOP_LEN_MAX)
            return fail(err, 400, "stop", NULL, "stop string longer than %d bytes",
                        GW_REQ_STOP_LEN_MAX);
        if (s->valuestring[0] != '\0')
            r->stop[r->n_stop++] = gw_arena_strdup(a, s->valuestring);
    }
    return 0;
}

/* arr (a JSON array) as token ids (integers in [0, INT32_MAX]) into *out (arena), *n of them */
static int token_ids(const cJSON *arr, const char *param, struct gw_arena *a, int32_t **out,
                     size_t *n, struct gw_req_err *err)
{
    int cnt = cJSON_GetArraySize(arr);
    *out = gw_arena_alloc(a, (size_t)(cnt ? cnt : 1) * sizeof(int32_t));
    *n = 0;
    cJSON *t;
    cJSON_ArrayForEach(t, arr)
    {
        double v = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!cJSON_IsNumber(t) || v != floor(v) || v < 0 || v > (double)INT32_MAX)
            return fail(err, 400, param, NULL, "'%s' token ids must be integers >= 0", param);
        (*out)[(*n)++] = (int32_t)v;
    }
    return 0;
}

/* "logit_bias": {"<token id>": bias, ...}; biases clamped to [-100, 100] as vLLM does */
static int parse_logit_bias(struct gw_req *r, const cJSON *root, struct gw_arena *a,
                            struct gw_req_err *err)
{
    cJSON *lb = gw_req_field(root, "logit_bias");
    if (!lb)
        return 0;
    if (!cJSON_IsObject(lb))
        return fail(err, 400, "logit_bias", NULL,
                    "'logit_bias' must be an object of token id -> bias");
    int n = cJSON_GetArraySize(lb);
    if (n > GW_REQ_LOGIT_BIAS_MAX)
        return fail(err, 400, "logit_bias", NULL, "at most %d logit_bias entries, got %d",
                    GW_REQ_LOGIT_BIAS_MAX, n);
    r->bias_ids = gw_arena_alloc(a, (size_t)(n ? n : 1) * sizeof(int32_t));
    r->bias_vals = gw_arena_alloc(a, (size_t)(n ? n : 1) * sizeof(float));
    cJSON *it;
    cJSON_ArrayForEach(it, lb)
    {
        const char *k = it->string;
        size_t len = strlen(k);
        bool digits = len > 0 && len <= 10;
        for (size_t i = 0; digits && i < len; i++)
            digits = k[i] >= '0' && k[i] <= '9';
        long long id = digits ? strtoll(k, NULL, 10) : -1;
        if (id < 0 || id > INT32_MAX)
            return fail(err, 400, "logit_bias", NULL,
                        "logit_bias key '%.32s' is not a token id (an integer >= 0 as a string)",
                        k);
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
            return fail(err, 400, "logit_bias", NULL, "logit_bias['%.32s'] must be a number", k);
        double v = it->valuedouble;
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias_vals[r->n_bias++] = (float)(v < -100 ? -100 : v > 100 ? 100 : v);
    }
    return 0;
}

static int parse_stop_ids(struct gw_req *r, const cJSON *root, struct gw_arena *a,
                          struct gw_req_err *err)
{
    cJSON *ids = gw_req_field(root, "stop_token_ids");
    if (!ids)
        return 0;
    if (!cJSON_IsArray(ids))
        return fail(err, 400, "stop_token_ids", NULL, "'stop_token_ids' must be a list of ids");
    int n = cJSON_GetArraySize(ids);
    if (n > GW_REQ_STOP_IDS_MAX)
        return fail(err, 400, "stop_token_ids", NULL, "at most %d stop_token_ids, got %d",
                    GW_REQ_STOP_IDS_MAX, n);
    size_t got = 0;
    int rc = token_ids(ids, "stop_token_ids", a, &r->stop_ids, &got, err);
    r->n_stop_ids = (int)got;
    return rc;
}

static int parse_messages(struct gw_req *r, cJSON *root, struct gw_req_err *err)
{
    cJSON *msgs = gw_req_field(root, "messages");
    if (!msgs)
        return fail(err, 400, "messages", NULL, "'messages' is required");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return fail(err, 400, "messages", NULL, "'messages' must be a non-empty list");
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    cJSON *m;
    int i = 0;
    cJSON_ArrayForEach(m, msgs)
    {
        cJSON *role = cJSON_IsObject(m) ? gw_req_field(m, "role") : NULL;
        if (!role || !cJSON_IsString(role))
            return fail(err, 400, "messages", NULL, "messages[%d] needs a string 'role'", i);
        bool known = false;
        for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]); k++)
            known |= strcmp(role->valuestring, roles[k]) == 0;
        if (!known)
            return fail(err, 400, "messages", NULL, "messages[%d]: unknown role '%.40s'", i,
                        role->valuestring);
        /* newer OpenAI clients send "developer" for "system"; the Qwen templates know only
         * "system" (one drops the message, the other refuses it) */
        if (strcmp(role->valuestring, "developer") == 0)
            cJSON_ReplaceItemInObjectCaseSensitive(m, "role", cJSON_CreateString("system"));
        cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (content && !cJSON_IsNull(content) && !cJSON_IsString(content) &&
            !cJSON_IsArray(content))
            return fail(err, 400, "messages", NULL,
                        "messages[%d]: 'content' must be a string or a list of parts", i);
        i++;
    }
    r->messages = msgs;
    return 0;
}

static int parse_tools(struct gw_req *r, cJSON *root, struct gw_arena *a, struct gw_req_err *err)
{
    cJSON *tools = gw_req_field(root, "tools");
    if (tools) {
        if (!cJSON_IsArray(tools))
            return fail(err, 400, "tools", NULL, "'tools' must be a list");
        cJSON *t;
        int i = 0;
        cJSON_ArrayForEach(t, tools)
        {
            cJSON *type = cJSON_IsObject(t) ? gw_req_field(t, "type") : NULL;
            cJSON *fn = cJSON_IsObject(t) ? gw_req_field(t, "function") : NULL;
            cJSON *name = fn ? gw_req_field(fn, "name") : NULL;
            if (!type || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 ||
                !fn || !cJSON_IsObject(fn) || !name || !cJSON_IsString(name) ||
                name->valuestring[0] == '\0')
                return fail(err, 400, "tools", NULL,
                            "tools[%d] must be {\"type\":\"function\",\"function\":{\"name\":...}}",
                            i);
            i++;
        }
        if (cJSON_GetArraySize(tools) > 0)
            r->tools = tools;
    }
    cJSON *tc = gw_req_field(root, "tool_choice");
    if (!tc)
        return 0;
    if (cJSON_IsString(tc)) {
        if (strcmp(tc->valuestring, "auto") == 0)
            r->tool_choice = GW_TOOL_CHOICE_AUTO;
        else if (strcmp(tc->valuestring, "none") == 0)
            r->tool_choice = GW_TOOL_CHOICE_NONE;
        else if (strcmp(tc->valuestring, "required") == 0)
            r->tool_choice = GW_TOOL_CHOICE_REQUIRED;
        else
            return fail(err, 400, "tool_choice", NULL,
                        "'tool_choice' must be \"none\", \"auto\", \"required\" or a function");
    } else if (cJSON_IsObject(tc)) {
        cJSON *fn = gw_req_field(tc, "function");
        cJSON *name = fn ? gw_req_field(fn, "name") : NULL;
        if (!name || !cJSON_IsString(name))
            return fail(err, 400, "tool_choice", NULL, "'tool_choice.function.name' is required");
        r->tool_choice = GW_TOOL_CHOICE_NAMED;
        r->tool_choice_name = gw_arena_strdup(a, name->valuestring);
    } else {
        return fail(err, 400, "tool_choice", NULL, "'tool_choice' must be a string or an object");
    }
    if ((r->tool_choice == GW_TOOL_CHOICE_REQUIRED || r->tool_choice == GW_TOOL_CHOICE_NAMED) &&
        !r->tools)
        return fail(err, 400, "tool_choice", NULL,
                    "'tool_choice' %s needs a non-empty 'tools' list",
                    r->tool_choice == GW_TOOL_CHOICE_NAMED ? "naming a function" : "\"required\"");
    if (r->tool_choice == GW_TOOL_CHOICE_NAMED) {
        bool found = false;
        cJSON *t;
        cJSON_ArrayForEach(t, r->tools)
        {
            cJSON *name = gw_req_field(gw_req_field(t, "function"), "name");
            found |= strcmp(name->valuestring, r->tool_choice_name) == 0;
        }
        if (!found)
            return fail(err, 400, "tool_choice", NULL, "tool_choice names unknown function '%.64s'",
                        r->tool_choice_name);
    }
    return 0;
}

/* tool_choice "required" / named: the tool-call grammar (text/grammar_tools.h) goes to the worker
 * in place of a schema, so the output is one call (parallel_tool_calls false, or a named function)
 * or several. Needs tools, tool_choice, parallel_tool_calls and response_format parsed before. */
static int force_tools(struct gw_req *r, struct gw_arena *a, struct gw_req_err *err)
{
    if (r->tool_choice != GW_TOOL_CHOICE_REQUIRED && r->tool_choice != GW_TOOL_CHOICE_NAMED)
        return 0;
    if (r->json_schema)
        return fail(err, 400, "tool_choice", NULL,
                    "tool_choice \"required\" or a named function cannot be combined with a JSON "
                    "response_format: the output is a tool call");
    if (r->ignore_eos)
        return fail(err, 400, "ignore_eos", NULL,
                    "ignore_eos cannot be combined with a forced tool_choice: the output ends "
                    "after the tool call");
    if (r->min_tokens > 0)
        return fail(err, 400, "min_tokens", NULL,
                    "min_tokens cannot be combined with a forced tool_choice: the output ends "
                    "after the tool call");
    char *tj = cJSON_PrintUnformatted(r->tools);
    bool named = r->tool_choice == GW_TOOL_CHOICE_NAMED;
    /* a named function is one call whatever parallel_tool_calls says (OpenAI's definition) */
    char *spec = tj ? grammar_tools_spec(tj, named ? r->tool_choice_name : NULL,
                                         r->parallel_tool_calls)
                    : NULL;
    cJSON_free(tj);
    if (!spec)
        return fail(err, 500, "tools", NULL, "out of memory");
    char why[256];
    struct grammar *g = grammar_tools_compile(spec, strlen(spec), why, sizeof(why));
    if (!g) {
        free(spec);
        return fail(err, 400, "tools", NULL, "tool_choice cannot be enforced: %s", why);
    }
    grammar_destroy(g);
    r->json_schema = gw_arena_strdup(a, spec);
    free(spec);
    return 0;
}

static int parse_thinking(struct gw_req *r, cJSON *root, struct gw_req_err *err)
{
    cJSON *kw = gw_req_field(root, "chat_template_kwargs");
    if (kw) {
        if (!cJSON_IsObject(kw))
            return fail(err, 400, "chat_template_kwargs", NULL,
                        "'chat_template_kwargs' must be an object");
        r->template_kwargs = kw;
        cJSON *et = gw_req_field(kw, "enable_thinking");
        if (et) {
            if (!cJSON_IsBool(et))
                return fail(err, 400, "chat_template_kwargs.enable_thinking", NULL,
                            "'enable_thinking' must be a boolean");
            r->enable_thinking = cJSON_IsTrue(et) ? 1 : 0;
        }
    }
    cJSON *eff = gw_req_field(root, "reasoning_effort");
    if (eff) {
        static const char *const ok[] = {"none", "minimal", "low", "medium", "high"};
        bool known = false;
        if (cJSON_IsString(eff))
            for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
                known |= strcmp(eff->valuestring, ok[i]) == 0;
        if (!known)
            return fail(err, 400, "reasoning_effort", NULL,
                        "'reasoning_effort' must be one of none, minimal, low, medium, high");
        if (strcmp(eff->valuestring, "none") == 0)
            r->enable_thinking = 0;
        else if (r->enable_thinking < 0)
            r->enable_thinking = 1;
    }
    return 0;
}

static int parse_prompt(struct gw_req *r, cJSON *root, struct gw_arena *a, struct gw_req_err *err)
{
    cJSON *p = gw_req_field(root, "prompt");
    if (!p)
        return fail(err, 400, "prompt", NULL, "'prompt' is required");
    if (cJSON_IsString(p)) {
        r->prompt = gw_arena_strdup(a, p->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0)
        return fail(err, 400, "prompt", NULL,
                    "'prompt' must be a string, a list of one string, or a list of token ids");
    cJSON *first = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(first)) {
        if (cJSON_GetArraySize(p) != 1)
            return fail(err, 400, "prompt", NULL, "only one prompt per request is supported");
        r->prompt = gw_arena_strdup(a, first->valuestring);
        return 0;
    }
    return token_ids(p, "prompt", a, &r->prompt_ids, &r->n_prompt_ids, err);
}

// ---- strict JSON text check (RFC 8259) ----

/* cJSON is lenient (trailing bytes, leading zeros, "1.", bad \u hex, raw control characters,
 * any bytes in strings), so the body is checked once, strictly, before cJSON parses it. */
#define JSON_DEPTH_MAX 1000 /* cJSON's own nesting limit */

struct jscan {
    const unsigned char *s, *end;
    int depth;
    const unsigned char *key; /* top-level key whose value is being scanned, or NULL */
    size_t key_len;
    const char *what; /* the first error */
    bool enc;         /* it is a string encoding error (invalid UTF-8, lone surrogate) */
    size_t at;        /* its byte offset */
    const unsigned char *base;
};

static bool js_err(struct jscan *j, const char *what, bool enc)
{
    j->what = what;
    j->enc = enc;
    j->at = (size_t)(j->s - j->base);
    return false;
}

static void js_ws(struct jscan *j)
{
    while (j->s < j->end && (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r'))
        j->s++;
}

static int js_hex4(const unsigned char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* length of the valid UTF-8 sequence (RFC 3629) at s, 0 if invalid */
static size_t js_utf8_len(const unsigned char *s, const unsigned char *end)
{
    unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else
        return 0;
    if ((size_t)(end - s) < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

static bool js_string(struct jscan *j)
{
    j->s++; /* opening quote */
    while (j->s < j->end) {
        unsigned c = *j->s;
        if (c == '"') {
            j->s++;
            return true;
        }
        if (c < 0x20)
            return js_err(j, "raw control character in a string", false);
        if (c >= 0x80) {
            size_t n = js_utf8_len(j->s, j->end);
            if (n == 0)
                return js_err(j, "invalid UTF-8", true);
            j->s += n;
            continue;
        }
        if (c != '\\') {
            j->s++;
            continue;
        }
        if (j->end - j->s < 2)
            break;
        c = j->s[1];
        if (c != 'u') {
            if (!strchr("\"\\/bfnrt", (int)c) || c == '\0')
                return js_err(j, "invalid escape in a string", false);
            j->s += 2;
            continue;
        }
        int u = j->end - j->s >= 6 ? js_hex4(j->s + 2) : -1;
        if (u < 0)
            return js_err(j, "invalid unicode escape in a string", false);
        if (u >= 0xDC00 && u <= 0xDFFF)
            return js_err(j, "a lone surrogate escape", true);
        j->s += 6;
        if (u >= 0xD800 && u <= 0xDBFF) {
            int lo =
                (j->end - j->s >= 6 && j->s[0] == '\\' && j->s[1] == 'u') ? js_hex4(j->s + 2) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return js_err(j, "a lone surrogate escape", true);
            j->s += 6;
        }
    }
    return js_err(j, "unterminated string", false);
}

static bool js_digits(struct jscan *j)
{
    const unsigned char *s0 = j->s;
    while (j->s < j->end && *j->s >= '0' && *j->s <= '9')
        j->s++;
    return j->s > s0;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static bool js_number(struct jscan *j)
{
    if (*j->s == '-')
        j->s++;
    if (j->s < j->end && *j->s == '0')
        j->s++;
    else if (!js_digits(j))
        return js_err(j, "invalid number", false);
    if (j->s < j->end && *j->s == '.') {
        j->s++;
        if (!js_digits(j))
            return js_err(j, "invalid number", false);
    }
    if (j->s < j->end && (*j->s == 'e' || *j->s == 'E')) {
        j->s++;
        if (j->s < j->end && (*j->s == '+' || *j->s == '-'))
            j->s++;
        if (!js_digits(j))
            return js_err(j, "invalid number", false);
    }
    if (j->s < j->end && ((*j->s >= '0' && *j->s <= '9') || *j->s == '.'))
        return js_err(j, "invalid number", false); /* "02", "1.2.3" */
    return true;
}

static bool js_value(struct jscan *j);

static bool js_container(struct jscan *j)
{
    bool obj = *j->s == '{';
    unsigned char close = obj ? '}' : ']';
    if (++j->depth > JSON_DEPTH_MAX)
        return js_err(j, "nested too deeply", false);
    j->s++;
    js_ws(j);
    if (j->s < j->end && *j->s == close) {
        j->s++;
        j->depth--;
        return true;
    }
    for (;;) {
        if (obj) {
            if (j->s >= j->end || *j->s != '"')
                return js_err(j, "expected a string key", false);
            const unsigned char *k = j->s;
            if (!js_string(j))
                return false;
            if (j->depth == 1) {
                j->key = k + 1;
                j->key_len = (size_t)(j->s - k - 2);
            }
            js_ws(j);
            if (j->s >= j->end || *j->s != ':')
                return js_err(j, "expected ':'", false);
            j->s++;
        }
        if (!js_value(j))
            return false;
        js_ws(j);
        if (j->s < j->end && *j->s == ',') {
            j->s++;
            js_ws(j);
            continue;
        }
        if (j->s < j->end && *j->s == close) {
            j->s++;
            j->depth--;
            if (j->depth == 0)
                j->key = NULL;
            return true;
        }
        return js_err(j, obj ? "expected ',' or '}'" : "expected ',' or ']'", false);
    }
}

static bool js_value(struct jscan *j)
{
    js_ws(j);
    if (j->s >= j->end)
        return js_err(j, "unexpected end of input", false);
    static const char *const lits[] = {"true", "false", "null"};
    switch (*j->s) {
    case '{':
    case '[':
        return js_container(j);
    case '"':
        return js_string(j);
    case 't':
    case 'f':
    case 'n':
        for (size_t i = 0; i < ARRAY_LEN(lits); i++) {
            size_t n = strlen(lits[i]);
            if ((size_t)(j->end - j->s) >= n && memcmp(j->s, lits[i], n) == 0) {
                j->s += n;
                return true;
            }
        }
        return js_err(j, "invalid literal", false);
    default:
        if (*j->s == '-' || (*j->s >= '0' && *j->s <= '9'))
            return js_number(j);
        return js_err(j, "unexpected character", false);
    }
}

/* 0 when body[0..len) is one JSON value (RFC 8259) with only whitespace around it; else
 * ERR_INVAL with err filled: param is the top-level key for a string encoding error, else null */
static int json_check(const char *body, size_t len, struct gw_arena *a, struct gw_req_err *err)
{
    struct jscan j = {.s = (const unsigned char *)body,
                      .end = (const unsigned char *)body + len,
                      .base = (const unsigned char *)body};
    if (js_value(&j)) {
        js_ws(&j);
        if (j.s == j.end)
            return 0;
        js_err(&j, "unexpected data after the JSON value", false);
    }
    const char *param = NULL;
    if (j.enc && j.key && j.key_len > 0 && j.key_len <= 64) {
        bool plain = true;
        for (size_t i = 0; i < j.key_len; i++)
            plain = plain && j.key[i] >= 0x20 && j.key[i] < 0x7f && j.key[i] != '\\';
        if (plain)
            param = gw_arena_strndup(a, (const char *)j.key, j.key_len);
    }
    if (j.enc)
        return fail(err, 400, param, NULL,
                    "%s%s%s contains %s at byte %zu (JSON text must be UTF-8)", param ? "'" : "",
                    param ? param : "the request body", param ? "'" : "", j.what, j.at);
    return fail(err, 400, NULL, NULL, "request body is not valid JSON: %s at byte %zu", j.what,
                j.at);
}

/* response_format: text, json_object (any object) or json_schema (the subset of text/grammar.h;
 * anything else is refused naming the keyword). Sets r->json_schema to the schema text the
 * worker compiles. Needs ignore_eos and min_tokens parsed before. */
static int parse_response_format(struct gw_req *r, const cJSON *rf, struct gw_arena *a,
                                 struct gw_req_err *err)
{
    if (!rf)
        return 0;
    const cJSON *t = cJSON_IsObject(rf) ? gw_req_field(rf, "type") : NULL;
    if (!t || !cJSON_IsString(t))
        return fail(err, 400, "response_format", NULL, "'response_format.type' is required");
    if (!strcmp(t->valuestring, "text"))
        return 0;
    char *text = NULL;
    if (!strcmp(t->valuestring, "json_object")) {
        r->json_schema = "{\"type\":\"object\"}";
    } else if (!strcmp(t->valuestring, "json_schema")) {
        const cJSON *js = gw_req_field(rf, "json_schema");
        if (!cJSON_IsObject(js))
            return fail(err, 400, "response_format", NULL,
                        "'response_format.json_schema' is required (an object)");
        const cJSON *k;
        cJSON_ArrayForEach(k, js)
        {
            if (strcmp(k->string, "name") && strcmp(k->string, "description") &&
                strcmp(k->string, "schema") && strcmp(k->string, "strict"))
                return fail(err, 400, "response_format", NULL,
                            "unsupported key '%.64s' in response_format.json_schema", k->string);
        }
        const cJSON *name = gw_req_field(js, "name"), *strict = gw_req_field(js, "strict");
        if ((name && !cJSON_IsString(name)) || (strict && !cJSON_IsBool(strict) &&
                                                !cJSON_IsNull(strict)))
            return fail(err, 400, "response_format", NULL,
                        "response_format.json_schema: 'name' must be a string and 'strict' a "
                        "boolean");
        const cJSON *sch = gw_req_field(js, "schema");
        if (!cJSON_IsObject(sch))
            return fail(err, 400, "response_format", NULL,
                        "'response_format.json_schema.schema' is required (an object)");
        text = cJSON_PrintUnformatted(sch);
        if (!text)
            return fail(err, 500, "response_format", NULL, "out of memory");
        char why[256];
        struct grammar *g = grammar_compile(text, strlen(text), why, sizeof(why));
        grammar_destroy(g);
        if (!g) {
            cJSON_free(text);
            return fail(err, 400, "response_format", NULL,
                        "response_format.json_schema.schema: %s", why);
        }
        r->json_schema = gw_arena_strdup(a, text);
        cJSON_free(text);
    } else {
        return fail(err, 400, "response_format", NULL,
                    "response_format type '%.32s' is not supported (text, json_object, "
                    "json_schema)", t->valuestring);
    }
    if (r->ignore_eos)
        return fail(err, 400, "ignore_eos", NULL,
                    "ignore_eos cannot be combined with a JSON response_format: the output ends "
                    "when the JSON value is complete");
    if (r->min_tokens > 0)
        return fail(err, 400, "min_tokens", NULL,
                    "min_tokens cannot be combined with a JSON response_format: the output ends "
                    "when the JSON value is complete");
    return 0;
}

// ---- the top-level fields each endpoint knows (docs/API.md "Field list") ----

#define KC (1u << GW_REQ_KIND_CHAT)
#define KP (1u << GW_REQ_KIND_COMPLETION)

/* Every top-level key of a chat / completions body that tern reads: gw_req_parse's, those the
 * chat template reads from the body itself (text/chat.c: messages, tools, add_generation_prompt,
 * chat_template_kwargs), the ones accepted and ignored on purpose (user, metadata, store,
 * service_tier) and the refused ones below. Any other key is unknown: ignored, as vLLM does, and
 * named in one warning line (gw_req_unknown_fields). */
static const struct gw_req_known {
    const char *name;
    unsigned kinds; /* KC, KP */
} known[] = {
    {"model", KC | KP},
    {"messages", KC},
    {"prompt", KP},
    {"max_tokens", KC | KP},
    {"max_completion_tokens", KC | KP},
    {"temperature", KC | KP},
    {"top_p", KC | KP},
    {"top_k", KC | KP},
    {"min_p", KC | KP},
    {"presence_penalty", KC | KP},
    {"frequency_penalty", KC | KP},
    {"repetition_penalty", KC | KP},
    {"seed", KC | KP},
    {"n", KC | KP},
    {"min_tokens", KC | KP},
    {"stop", KC | KP},
    {"stop_token_ids", KC | KP},
    {"logit_bias", KC | KP},
    {"stream", KC | KP},
    {"stream_options", KC | KP},
    {"ignore_eos", KC | KP},
    {"logprobs", KC | KP},
    {"top_logprobs", KC},
    {"response_format", KC | KP},
    {"tools", KC},
    {"tool_choice", KC},
    {"parallel_tool_calls", KC},
    {"chat_template_kwargs", KC},
    {"reasoning_effort", KC},
    {"add_generation_prompt", KC},
    {"echo", KC | KP},
    {"best_of", KP},
    {"suffix", KP},
    {"user", KC | KP},
    {"metadata", KC},
    {"store", KC},
    {"service_tier", KC},
    {"use_beam_search", KC | KP},
    {"include_stop_str_in_output", KC | KP},
    {"prompt_logprobs", KC | KP},
    {"allowed_token_ids", KC | KP},
    {"bad_words", KC | KP},
    {"truncate_prompt_tokens", KC | KP},
    {"guided_json", KC | KP},
    {"guided_regex", KC | KP},
    {"guided_choice", KC | KP},
    {"guided_grammar", KC | KP},
    {"structured_outputs", KC | KP},
    {"continue_final_message", KC},
    {"functions", KC},
    {"function_call", KC},
};

/* Fields vLLM or OpenAI honour and tern does not implement: absent, null or the no-op value
 * (JSON text; NULL = only null) passes, anything else is a 400 naming the field, not an answer
 * that silently ignores it. Completions' echo / best_of / suffix are checked in gw_req_parse. */
static const struct {
    const char *name;
    unsigned kinds;
    const char *noop;
    const char *instead; /* what to use, or "" */
} unsupported[] = {
    {"use_beam_search", KC | KP, "false", ""},
    {"include_stop_str_in_output", KC | KP, "false", ""},
    {"prompt_logprobs", KC | KP, NULL, ""},
    {"allowed_token_ids", KC | KP, NULL, " (logit_bias can lower other tokens)"},
    {"bad_words", KC | KP, "[]", ""},
    {"truncate_prompt_tokens", KC | KP, NULL, ""},
    {"guided_json", KC | KP, NULL, " (use response_format json_schema)"},
    {"guided_regex", KC | KP, NULL, ""},
    {"guided_choice", KC | KP, NULL, ""},
    {"guided_grammar", KC | KP, NULL, ""},
    {"structured_outputs", KC | KP, NULL, " (use response_format)"},
    {"continue_final_message", KC, "false", ""},
    {"echo", KC, "false", ""},
    {"functions", KC, NULL, " (use tools)"},
    {"function_call", KC, NULL, " (use tool_choice)"},
};

static int check_unsupported(const struct gw_req *r, struct gw_req_err *err)
{
    for (size_t i = 0; i < ARRAY_LEN(unsupported); i++) {
        if (!(unsupported[i].kinds & (1u << r->kind)))
            continue;
        cJSON *v = gw_req_field(r->root, unsupported[i].name);
        if (!v)
            continue;
        cJSON *noop = unsupported[i].noop ? cJSON_Parse(unsupported[i].noop) : NULL;
        bool same = noop && cJSON_Compare(v, noop, true);
        cJSON_Delete(noop);
        if (!same)
            return fail(err, 400, unsupported[i].name, NULL, "'%s' is not supported%s",
                        unsupported[i].name, unsupported[i].instead);
    }
    return 0;
}

const char *gw_req_known_field(size_t i, unsigned *kinds)
{
    if (i >= ARRAY_LEN(known))
        return NULL;
    *kinds = known[i].kinds;
    return known[i].name;
}

bool gw_req_is_known_field(enum gw_req_kind kind, const char *name)
{
    for (size_t i = 0; i < ARRAY_LEN(known); i++)
        if ((known[i].kinds & (1u << kind)) && strcmp(known[i].name, name) == 0)
            return true;
    return false;
}

int gw_req_unknown_keys(const struct cJSON *obj, gw_req_is_known_fn is_known, const void *ctx,
                        char *out, size_t cap)
{
    int n = 0;
    size_t len = 0;
    if (cap)
        out[0] = '\0';
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        if (!it->string || is_known(it->string, ctx))
            continue;
        /* the names go into a log line: [A-Za-z0-9_.-] as is, other bytes as '?' */
        if (n > 0 && len + 1 < cap)
            out[len++] = ',';
        for (size_t i = 0; it->string[i] && i < 64 && len + 1 < cap; i++) {
            char ch = it->string[i];
            bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                         (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
            out[len++] = plain ? ch : '?';
        }
        if (cap)
            out[len] = '\0';
        n++;
    }
    return n;
}

static bool req_is_known(const char *name, const void *ctx)
{
    return gw_req_is_known_field(*(const enum gw_req_kind *)ctx, name);
}

int gw_req_unknown_fields(const struct gw_req *r, char *out, size_t cap)
{
    return gw_req_unknown_keys(r->root, req_is_known, &r->kind, out, cap);
}

int gw_req_parse(struct gw_req *r, enum gw_req_kind kind, const char *body, size_t len,
                 const char *served_model, struct gw_arena *a, struct gw_req_err *err)
{
    memset(r, 0, sizeof(*r));
    memset(err, 0, sizeof(*err));
    r->kind = kind;
    r->max_tokens = -1;
    r->temperature = 1.0;
    r->top_p = 1.0;
    r->repetition_penalty = 1.0;
    r->enable_thinking = -1;
    r->max_tokens_cap = -1;
    r->n = 1;
    r->parallel_tool_calls = true;
    if (json_check(body, len, a, err))
        return ERR_INVAL;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root)
        return fail(err, 400, NULL, NULL, "request body is not valid JSON");
    gw_arena_cleanup_add(a, gw_req_free_json, root);
    r->root = root;
    if (!cJSON_IsObject(root))
        return fail(err, 400, NULL, NULL, "request body must be a JSON object");

    cJSON *model = gw_req_field(root, "model");
    if (model) {
        if (!cJSON_IsString(model))
            return fail(err, 400, "model", NULL, "'model' must be a string");
        r->model = gw_arena_strdup(a, model->valuestring);
        if (served_model && strcmp(r->model, served_model) != 0) {
            fail(err, 404, "model", "model_not_found", "The model '%.128s' does not exist.",
                 r->model);
            return ERR_INVAL;
        }
    }
    int rc;
    if (kind == GW_REQ_KIND_CHAT)
        rc = parse_messages(r, root, err);
    else
        rc = parse_prompt(r, root, a, err);
    if (rc)
        return rc;

    bool has;
    int64_t v = 0;
    if ((rc = get_int(root, "max_completion_tokens", 1, INT32_MAX, &has, &v, err)))
        return rc;
    if (has)
        r->max_tokens = v;
    else {
        if ((rc = get_int(root, "max_tokens", 1, INT32_MAX, &has, &v, err)))
            return rc;
        if (has)
            r->max_tokens = v;
    }
    if ((rc = get_num(root, "temperature", 0, false, 2, false, &r->temperature, err)) ||
        (rc = get_num(root, "top_p", 0, true, 1, false, &r->top_p, err)) ||
        (rc = get_num(root, "min_p", 0, false, 1, false, &r->min_p, err)) ||
        (rc = get_num(root, "presence_penalty", -2, false, 2, false, &r->presence_penalty, err)) ||
        (rc =
             get_num(root, "frequency_penalty", -2, false, 2, false, &r->frequency_penalty, err)) ||
        (rc = get_num(root, "repetition_penalty", 0, true, 2, false, &r->repetition_penalty, err)))
        return rc;
    if ((rc = get_int(root, "top_k", -1, 1 << 20, NULL, &r->top_k, err)))
        return rc;
    if (r->top_k < 0)
        r->top_k = 0;
    static const struct {
        const char *name;
        unsigned bit;
    } given[] = {{"temperature", GW_REQ_GIVEN_TEMPERATURE},
                 {"top_p", GW_REQ_GIVEN_TOP_P},
                 {"top_k", GW_REQ_GIVEN_TOP_K},
                 {"min_p", GW_REQ_GIVEN_MIN_P},
                 {"repetition_penalty", GW_REQ_GIVEN_REPETITION_PENALTY}};
    for (size_t i = 0; i < ARRAY_LEN(given); i++)
        if (gw_req_field(root, given[i].name))
            r->given |= given[i].bit;
    cJSON *seed = gw_req_field(root, "seed");
    if (seed) {
        double s = seed->valuedouble;
        if (!cJSON_IsNumber(seed) || s != floor(s) || fabs(s) > 9.2e18)
            return fail(err, 400, "seed", NULL, "'seed' must be an integer");
        r->has_seed = true;
        r->seed = (uint64_t)(int64_t)s;
    }
    int64_t n = 1;
    if ((rc = get_int(root, "n", 1, GW_REQ_N_MAX, NULL, &n, err)))
        return rc;
    r->n = (int)n;
    if ((rc = get_int(root, "min_tokens", 0, INT32_MAX, NULL, &r->min_tokens, err)))
        return rc;
    if (r->max_tokens >= 0 && r->min_tokens > r->max_tokens)
        return fail(err, 400, "min_tokens", NULL,
                    "min_tokens (%lld) must be less than or equal to max_tokens (%lld)",
                    (long long)r->min_tokens, (long long)r->max_tokens);
    if ((rc = parse_stop(r, root, a, err)) || (rc = parse_stop_ids(r, root, a, err)) ||
        (rc = parse_logit_bias(r, root, a, err)))
        return rc;
    if ((rc = get_bool(root, "stream", &r->stream, err)) ||
        (rc = get_bool(root, "ignore_eos", &r->ignore_eos, err)))
        return rc;
    cJSON *so = gw_req_field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return fail(err, 400, "stream_options", NULL, "'stream_options' must be an object");
        cJSON *iu = gw_req_field(so, "include_usage");
        if (iu && !cJSON_IsBool(iu))
            return fail(err, 400, "stream_options.include_usage", NULL,
                        "'include_usage' must be a boolean");
        r->include_usage = iu && cJSON_IsTrue(iu);
    }
    /* logprobs: chat takes a boolean plus top_logprobs 0..20; completions an integer 0..5
     * (the number of alternatives) */
    if (kind == GW_REQ_KIND_CHAT) {
        if ((rc = get_bool(root, "logprobs", &r->logprobs, err)))
            return rc;
        int64_t top = 0;
        bool has_top = false;
        if ((rc = get_int(root, "top_logprobs", 0, GW_REQ_TOP_LOGPROBS_MAX, &has_top, &top, err)))
            return rc;
        if (has_top && top > 0 && !r->logprobs)
            return fail(err, 400, "top_logprobs", NULL, "'top_logprobs' needs 'logprobs': true");
        r->top_logprobs = (int)top;
    } else {
        int64_t lpn = 0;
        bool has_lp = false;
        if ((rc = get_int(root, "logprobs", 0, 5, &has_lp, &lpn, err)))
            return rc;
        r->logprobs = has_lp;
        r->top_logprobs = (int)lpn;
    }
    if ((rc = parse_response_format(r, gw_req_field(root, "response_format"), a, err)))
        return rc;
    if (kind == GW_REQ_KIND_CHAT) {
        if ((rc = parse_tools(r, root, a, err)) || (rc = parse_thinking(r, root, err)) ||
            (rc = get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, err)) ||
            (rc = force_tools(r, a, err)))
            return rc;
        /* constrained output (response_format, a forced tool call) starts at the first
         * completion token, so a prompt that opened <think> would put it in the reasoning (no
         * content, no tool_calls): thinking is off unless the request itself turns it on, over
         * --default-chat-template-kwargs too (vLLM applies the grammar after the reasoning) */
        if (r->json_schema && r->enable_thinking < 0)
            r->enable_thinking = 0;
    } else {
        if ((rc = get_bool(root, "echo", &r->echo, err)))
            return rc;
        if (r->echo)
            return fail(err, 400, "echo", NULL, "echo is not supported yet");
        cJSON *bo = gw_req_field(root, "best_of");
        if (bo && (!cJSON_IsNumber(bo) || bo->valuedouble != 1))
            return fail(err, 400, "best_of", NULL, "best_of other than 1 is not supported");
        cJSON *sfx = gw_req_field(root, "suffix");
        if (sfx && (!cJSON_IsString(sfx) || sfx->valuestring[0]))
            return fail(err, 400, "suffix", NULL, "suffix is not supported");
    }
    if (kind == GW_REQ_KIND_CHAT) { /* read by the chat template itself (text/chat.c) */
        bool agp = true;
        if ((rc = get_bool(root, "add_generation_prompt", &agp, err)))
            return rc;
    }
    return check_unsupported(r, err);
}

void gw_req_apply_defaults(struct gw_req *r, const struct gw_req_defaults *d)
{
    if (!d)
        return;
    if (d->has_temperature && !(r->given & GW_REQ_GIVEN_TEMPERATURE))
        r->temperature = d->temperature;
    if (d->has_top_p && !(r->given & GW_REQ_GIVEN_TOP_P))
        r->top_p = d->top_p;
    if (d->has_top_k && !(r->given & GW_REQ_GIVEN_TOP_K))
        r->top_k = d->top_k;
    if (d->has_min_p && !(r->given & GW_REQ_GIVEN_MIN_P))
        r->min_p = d->min_p;
    if (d->has_repetition_penalty && !(r->given & GW_REQ_GIVEN_REPETITION_PENALTY))
        r->repetition_penalty = d->repetition_penalty;
    if (d->has_max_tokens && r->max_tokens < 0)
        r->max_tokens_cap = d->max_tokens;
}

int gw_req_check_vocab(const struct gw_req *r, size_t vocab, struct gw_req_err *err)
{
    for (int i = 0; i < r->n_bias; i++)
        if ((size_t)r->bias_ids[i] >= vocab)
            return fail(err, 400, "logit_bias", NULL,
                        "token_id %d in logit_bias is outside the vocabulary (size %zu)",
                        r->bias_ids[i], vocab);
    for (int i = 0; i < r->n_stop_ids; i++)
        if ((size_t)r->stop_ids[i] >= vocab)
            return fail(err, 400, "stop_token_ids", NULL,
                        "token_id %d in stop_token_ids is outside the vocabulary (size %zu)",
                        r->stop_ids[i], vocab);
    return 0;
}

int gw_req_check_context(struct gw_req *r, int64_t prompt_tokens, int64_t max_model_len,
                         struct gw_req_err *err)
{
    const char *param = r->kind == GW_REQ_KIND_CHAT ? "messages" : "prompt";
    if (prompt_tokens <= 0)
        return fail(err, 400, param, NULL, "the prompt is empty");
    if (r->max_tokens < 0) {
        if (prompt_tokens >= max_model_len)
            return fail(err, 400, param, "context_length_exceeded",
                        "This model's maximum context length is %lld tokens. However, your "
                        "prompt contains %lld input tokens, which leaves no room for output. "
                        "Please reduce the length of the input prompt.",
                        (long long)max_model_len, (long long)prompt_tokens);
        r->max_tokens = max_model_len - prompt_tokens;
        if (r->max_tokens_cap >= 0 && r->max_tokens > r->max_tokens_cap)
            r->max_tokens = r->max_tokens_cap;
        if (r->min_tokens > r->max_tokens)
            return fail(err, 400, "min_tokens", NULL,
                        "min_tokens (%lld) must be less than or equal to max_tokens (%lld)",
                        (long long)r->min_tokens, (long long)r->max_tokens);
        return 0;
    }
    if (prompt_tokens + r->max_tokens > max_model_len)
        return fail(err, 400, param, "context_length_exceeded",
                    "This model's maximum context length is %lld tokens. However, you requested "
                    "%lld output tokens and your prompt contains %lld input tokens, for a total "
                    "of %lld tokens. Please reduce the length of the input prompt or the number "
                    "of requested output tokens.",
                    (long long)max_model_len, (long long)r->max_tokens, (long long)prompt_tokens,
                    (long long)(prompt_tokens + r->max_tokens));
    return 0;
}
