/* cat_gen: generated catalog cases. The parameter table lists every request parameter the
 * gateway accepts (services/gateway/gw_req.c, ECOSYSTEM.md A.2) with a value of the wrong
 * type, one below and one above its range (NULL where the parameter has no range), and
 * whether null is accepted (null counts as absent, except for required fields). Each row is
 * run on each endpoint that takes the parameter. cat_gen_limits adds header/body/URL limits,
 * invalid UTF-8 and nesting depth, sized from the running configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"
#include "common/xalloc.h"

enum { EP_CHAT = 1, EP_COMPL = 2, EP_BOTH = 3 };

struct param {
    const char *name;
    int endpoints;
    const char *wrong[3]; /* wrong types */
    const char *below;
    const char *above;
    const char *extra;    /* one more invalid value (NULL = none) */
    const char *ok;       /* a valid value (NULL = none worth sending) */
    const char *err_param; /* expected error param when not the name */
    bool required;
};

static const struct param params[] = {
    {"model", EP_BOTH, {"123", "[\"m\"]", "{}"}, NULL, NULL, NULL, NULL, NULL, false},
    {"messages", EP_CHAT, {"\"hi\"", "{}", "7"}, "[]", NULL,
     "[{\"role\":\"wizard\",\"content\":\"x\"}]", NULL, NULL, true},
    {"prompt", EP_COMPL, {"{}", "true", "7"}, "[-1]", "[[1],[2]]", "[1.5]", "[1,2,3]", NULL, true},
    {"max_tokens", EP_BOTH, {"\"4\"", "true", "[4]"}, "0", "2147483648", "1.5", "3", NULL, false},
    {"max_completion_tokens", EP_BOTH, {"\"4\"", "{}", "false"}, "0", "2147483648", "2.5", "3",
     NULL, false},
    {"temperature", EP_BOTH, {"\"0.5\"", "true", "[]"}, "-0.1", "2.01", "1e999", "0.7", NULL,
     false},
    {"top_p", EP_BOTH, {"\"1\"", "[]", "{}"}, "0", "1.01", "-1e999", "0.9", NULL, false},
    {"min_p", EP_BOTH, {"\"0\"", "{}", "true"}, "-0.5", "1.5", NULL, "0.1", NULL, false},
    {"presence_penalty", EP_BOTH, {"\"x\"", "false", "[1]"}, "-2.5", "2.5", NULL, "0.5", NULL,
     false},
    {"frequency_penalty", EP_BOTH, {"\"x\"", "true", "{}"}, "-2.01", "2.01", NULL, "-0.5", NULL,
     false},
    {"repetition_penalty", EP_BOTH, {"false", "\"1\"", "[]"}, "0", "2.5", "-1", "1.1", NULL,
     false},
    {"top_k", EP_BOTH, {"\"5\"", "true", "[5]"}, "-2", "1048577", "2.5", "40", NULL, false},
    {"seed", EP_BOTH, {"\"7\"", "true", "{}"}, "-1e19", "1e19", "0.5", "-3", NULL, false},
    {"n", EP_BOTH, {"\"1\"", "true", "[]"}, "0", "9", "1.5", "2", NULL, false},
    {"logit_bias", EP_BOTH, {"[]", "\"x\"", "5"}, NULL, NULL, "{\"x\":1}", "{\"11\":-5}", NULL,
     false},
    {"stop_token_ids", EP_BOTH, {"5", "{}", "\"1\""}, NULL, NULL, "[-1]", "[11]", NULL, false},
    {"min_tokens", EP_BOTH, {"\"1\"", "true", "[]"}, "-1", "2147483648", "1.5", "1", NULL,
     false},
    {"parallel_tool_calls", EP_CHAT, {"1", "\"no\"", "{}"}, NULL, NULL, NULL, "false", NULL,
     false},
    {"stop", EP_BOTH, {"5", "[1]", "{}"}, NULL, NULL, "[\"a\",null]", "[\"zzzz\"]", NULL, false},
    {"stream", EP_BOTH, {"\"true\"", "1", "[]"}, NULL, NULL, NULL, "false", NULL, false},
    {"ignore_eos", EP_BOTH, {"\"no\"", "0", "{}"}, NULL, NULL, NULL, "true", NULL, false},
    {"stream_options", EP_BOTH, {"true", "[]", "\"x\""}, NULL, NULL, "{\"include_usage\":\"yes\"}",
     "{\"include_usage\":true}", NULL, false},
    {"logprobs", EP_CHAT, {"\"yes\"", "1", "{}"}, NULL, NULL, NULL, "true", NULL, false},
    {"top_logprobs", EP_CHAT, {"\"2\"", "true", "[]"}, "-1", "21", "1.5", NULL, NULL, false},
    {"logprobs", EP_COMPL, {"true", "\"1\"", "[]"}, "-1", "6", "0.5", "2", NULL, false},
    {"response_format", EP_BOTH, {"\"json\"", "5", "[]"}, NULL, NULL, "{\"type\":\"json_schema\"}",
     "{\"type\":\"text\"}", NULL, false},
    {"tools", EP_CHAT, {"{}", "\"f\"", "5"}, NULL, NULL, "[{\"type\":\"x\"}]", NULL, NULL, false},
    {"tool_choice", EP_CHAT, {"5", "[]", "true"}, NULL, NULL, "\"maybe\"", "\"none\"", NULL,
     false},
    {"chat_template_kwargs", EP_CHAT, {"[]", "\"x\"", "5"}, NULL, NULL,
     "{\"enable_thinking\":\"yes\"}", "{\"enable_thinking\":false}", NULL, false},
    {"reasoning_effort", EP_CHAT, {"5", "true", "[]"}, NULL, NULL, "\"extreme\"", "\"low\"", NULL,
     false},
    {"echo", EP_COMPL, {"\"x\"", "1", "[]"}, NULL, NULL, "true", "false", NULL, false},
    {"best_of", EP_COMPL, {"\"1\"", "true", "[]"}, "0", "2", NULL, "1", NULL, false},
    {"suffix", EP_COMPL, {"5", "true", "[]"}, NULL, NULL, "\"x\"", NULL, NULL, false},
};

/* the body with name: value, the other fields valid; max_tokens kept small unless tested */
static void body_for(char *out, size_t n, int ep, const char *name, const char *value)
{
    bool own_max = strcmp(name, "max_tokens") == 0 || strcmp(name, "max_completion_tokens") == 0;
    const char *base;
    if (strcmp(name, "messages") == 0 || strcmp(name, "prompt") == 0)
        base = "";
    else
        base = ep == EP_CHAT ? "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                             : "\"prompt\":\"hello\",";
    snprintf(out, n, "{%s%s\"%s\":%s}", base, own_max ? "" : "\"max_tokens\":3,", name, value);
}

static void add_param_case(struct cat_list *l, int ep, const struct param *p, const char *what,
                           const char *value, bool valid)
{
    char name[96], body[1024], expect[256];
    snprintf(name, sizeof(name), "param_%s_%s_%s", ep == EP_CHAT ? "chat" : "compl", p->name,
             what);
    body_for(body, sizeof(body), ep, p->name, value);
    const char *path = ep == EP_CHAT ? "/v1/chat/completions" : "/v1/completions";
    if (valid) {
        cat_add_post(l, name, CAT_MAIN, path, NULL, body, strlen(body), "200", "ok");
        return;
    }
    const char *ep_param = p->err_param ? p->err_param : p->name;
    if (strcmp(value, "{\"include_usage\":\"yes\"}") == 0)
        ep_param = "stream_options.include_usage";
    if (strcmp(value, "{\"enable_thinking\":\"yes\"}") == 0)
        ep_param = "chat_template_kwargs.enable_thinking";
    snprintf(expect, sizeof(expect), "type=invalid_request_error,param=%s", ep_param);
    cat_add_post(l, name, CAT_MAIN, path, NULL, body, strlen(body), "400", expect);
}

void cat_gen_params(struct cat_list *l)
{
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
        const struct param *p = &params[i];
        for (int ep = EP_CHAT; ep <= EP_COMPL; ep++) {
            if (!(p->endpoints & ep))
                continue;
            for (int w = 0; w < 3; w++) {
                char what[16];
                snprintf(what, sizeof(what), "type%d", w);
                add_param_case(l, ep, p, what, p->wrong[w], false);
            }
            if (p->below)
                add_param_case(l, ep, p, "below", p->below, false);
            if (p->above)
                add_param_case(l, ep, p, "above", p->above, false);
            if (p->extra)
                add_param_case(l, ep, p, "invalid", p->extra, false);
            add_param_case(l, ep, p, "null", "null", !p->required);
            if (p->ok)
                add_param_case(l, ep, p, "valid", p->ok, true);
        }
    }
}

static void add_raw(struct cat_list *l, const char *name, const char *req, size_t n,
                    const char *st, const char *ex)
{
    cat_add(l, name, CAT_MAIN, req, n, st, ex);
}

/* a GET /v1/models with nh extra headers of hlen bytes each */
static void headers_case(struct cat_list *l, const char *name, int nh, int hlen, const char *st,
                         const char *ex)
{
    size_t cap = (size_t)nh * ((size_t)hlen + 32) + 256;
    char *r = xmalloc(cap);
    size_t n = (size_t)snprintf(r, cap, "GET /v1/models HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < nh; i++) {
        n += (size_t)snprintf(r + n, cap - n, "X-H%d: ", i);
        int v = hlen - (int)strlen("X-H: ") - 3;
        for (int k = 0; k < (v > 1 ? v : 1); k++)
            r[n++] = 'v';
        r[n++] = '\r';
        r[n++] = '\n';
    }
    n += (size_t)snprintf(r + n, cap - n, "\r\n");
    add_raw(l, name, r, n, st, ex);
    free(r);
}

static void content_case(struct cat_list *l, const char *name, int ep,
                         const char *fill_bytes, size_t reps, const char *st, const char *ex)
{
    size_t fl = strlen(fill_bytes);
    size_t cap = fl * reps + 256;
    char *b = xmalloc(cap);
    size_t n = (size_t)snprintf(b, cap, ep == EP_CHAT
                                            ? "{\"messages\":[{\"role\":\"user\",\"content\":\""
                                            : "{\"prompt\":\"");
    for (size_t i = 0; i < reps; i++) {
        memcpy(b + n, fill_bytes, fl);
        n += fl;
    }
    n += (size_t)snprintf(b + n, cap - n, "%s",
                          ep == EP_CHAT ? "\"}],\"max_tokens\":2}" : "\",\"max_tokens\":2}");
    cat_add_post(l, name, CAT_MAIN, ep == EP_CHAT ? "/v1/chat/completions" : "/v1/completions",
                 NULL, b, n, st, ex);
    free(b);
}

void cat_gen_limits(struct cat_list *l, int mml, int body_max)
{
    /* header count: 100 fields in all is the limit (Host + 99), 101 is over */
    headers_case(l, "hdr_count_at_limit", 99, 16, "200", "ok");
    headers_case(l, "hdr_count_over_limit", 100, 16, "431", "close");
    headers_case(l, "hdr_count_far_over", 400, 16, "431", "close");
    /* one field of 8 KiB is the limit, 9 KiB is over; total 32 KiB */
    headers_case(l, "hdr_field_9k", 1, 9 * 1024, "431", "close");
    headers_case(l, "hdr_field_64k", 1, 64 * 1024, "431", "close");
    headers_case(l, "hdr_total_over_32k", 6, 7 * 1024, "431", "close");
    headers_case(l, "hdr_total_under_32k", 3, 7 * 1024, "200", "ok");
    /* URL */
    {
        char *r = xmalloc(20000);
        int n = snprintf(r, 20000, "GET /v1/models/");
        memset(r + n, 'a', 9000);
        n += 9000;
        n += snprintf(r + n, 20000 - (size_t)n, " HTTP/1.1\r\nHost: t\r\n\r\n");
        add_raw(l, "uri_9k", r, (size_t)n, "414", "close");
        n = snprintf(r, 20000, "GET /v1/models/");
        memset(r + n, 'a', 7000);
        n += 7000;
        n += snprintf(r + n, 20000 - (size_t)n, " HTTP/1.1\r\nHost: t\r\n\r\n");
        add_raw(l, "uri_7k_unknown_model", r, (size_t)n, "404", "code=model_not_found");
        free(r);
    }
    /* bodies: just over the limit (sent whole), and a Content-Length far over (not sent) */
    content_case(l, "body_over_limit_sent", EP_CHAT, "a", (size_t)body_max + 10, "413",
                 "close");
    {
        char r[256];
        int n = snprintf(r, sizeof(r),
                         "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: "
                         "application/json\r\nContent-Length: %d\r\n\r\n",
                         body_max + 1);
        add_raw(l, "body_cl_over_limit_unsent", r, (size_t)n, "413", "close");
        n = snprintf(r, sizeof(r),
                     "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n"
                     "\r\n");
        add_raw(l, "body_cl_1g_unsent", r, (size_t)n, "413", "close");
        n = snprintf(r, sizeof(r),
                     "POST /v1/completions HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                     "Content-Length: %d\r\n\r\n",
                     body_max * 4);
        add_raw(l, "body_expect_continue_over", r, (size_t)n, "413|417", "close");
    }
    /* prompts over the model length: text and token ids, with and without max_tokens */
    content_case(l, "ctx_chat_text_over", EP_CHAT, "hello world ", (size_t)mml, "400",
                 "code=context_length_exceeded,param=messages,msg~maximum context length");
    content_case(l, "ctx_compl_text_over", EP_COMPL, "hello world ", (size_t)mml, "400",
                 "code=context_length_exceeded,param=prompt,msg~maximum context length");
    const int pm[6][2] = {{10, mml - 10}, {10, mml - 9}, {mml - 1, -1},
                          {mml, -1},  {mml + 1, -1},  {mml + 40, 1}};
    for (int k = 0; k < 6; k++) {
        int p = pm[k][0], m = pm[k][1]; /* m < 0: no max_tokens */
        size_t cap = (size_t)p * 8 + 128;
        char *b = xmalloc(cap);
        size_t n = (size_t)snprintf(b, cap, "{\"prompt\":[");
        for (int i = 0; i < p; i++)
            n += (size_t)snprintf(b + n, cap - n, "%s%d", i ? "," : "", 100 + i);
        if (m >= 0)
            n += (size_t)snprintf(b + n, cap - n, "],\"max_tokens\":%d}", m);
        else
            n += (size_t)snprintf(b + n, cap - n, "]}");
        char name[64];
        snprintf(name, sizeof(name), "ctx_ids_p%d_m%d", p, m);
        bool fits = (m >= 0 && p + m <= mml) || (m < 0 && p < mml);
        cat_add_post(l, name, CAT_MAIN, "/v1/completions", NULL, b, n, fits ? "200" : "400",
                     fits ? "ok" : "code=context_length_exceeded,param=prompt");
        free(b);
    }
    /* invalid UTF-8 inside JSON strings, both endpoints */
    static const struct {
        const char *name, *bytes;
    } bad_utf8[] = {
        {"ff", "a\xff" "b"},           {"fe", "\xfe"},
        {"lone_cont", "\x80"},         {"overlong_slash", "\xc0\xaf"},
        {"overlong_nul", "\xc0\x80"},  {"trunc2", "x\xc3"},
        {"trunc3", "\xe2\x82"},        {"surrogate", "\xed\xa0\x80"},
        {"above_10ffff", "\xf4\x90\x80\x80"}, {"five_byte", "\xf8\x88\x80\x80\x80"},
    };
    for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++)
        for (int ep = EP_CHAT; ep <= EP_COMPL; ep++) {
            char name[64];
            snprintf(name, sizeof(name), "utf8_%s_%s", ep == EP_CHAT ? "chat" : "compl",
                     bad_utf8[i].name);
            content_case(l, name, ep, bad_utf8[i].bytes, 1, "400",
                         "type=invalid_request_error");
        }
    /* nesting: far past any parser limit (rejected), and moderately deep in an ignored field */
    static const int depths[] = {1100, 10000, 60000};
    for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
        for (int kind = 0; kind < 2; kind++) {
            int d = depths[i];
            size_t cap = (size_t)d * 6 + 256;
            char *b = xmalloc(cap);
            size_t n = (size_t)snprintf(b, cap, "{\"prompt\":\"x\",\"deep\":");
            for (int k = 0; k < d && n + 8 < cap; k++)
                n += (size_t)snprintf(b + n, cap - n, "%s", kind ? "{\"a\":" : "[");
            if (i == 0) /* closed properly: only the depth is wrong */
                for (int k = 0; k < d; k++)
                    b[n++] = kind ? '}' : ']';
            b[n++] = '}';
            char name[64];
            snprintf(name, sizeof(name), "nest_%s_%d%s", kind ? "obj" : "arr", d,
                     i == 0 ? "_closed" : "_open");
            if (n <= (size_t)body_max)
                cat_add_post(l, name, CAT_MAIN, "/v1/completions", NULL, b, n, "400",
                             "type=invalid_request_error,param=null");
            free(b);
        }
    }
    {
        char b[4096];
        size_t n = (size_t)snprintf(b, sizeof(b), "{\"prompt\":\"x\",\"max_tokens\":2,\"deep\":");
        for (int k = 0; k < 200; k++)
            b[n++] = '[';
        for (int k = 0; k < 200; k++)
            b[n++] = ']';
        b[n++] = '}';
        cat_add_post(l, "nest_arr_200_ignored_field", CAT_MAIN, "/v1/completions", NULL, b, n,
                     "200", "ok");
    }
    /* stop strings: count and length limits (16 strings, 512 bytes) */
    {
        char b[16384];
        for (int count = 16; count <= 17; count++) {
            size_t n = (size_t)snprintf(b, sizeof(b), "{\"prompt\":\"x\",\"max_tokens\":2,\"stop\":[");
            for (int k = 0; k < count; k++)
                n += (size_t)snprintf(b + n, sizeof(b) - n, "%s\"s%d\"", k ? "," : "", k);
            n += (size_t)snprintf(b + n, sizeof(b) - n, "]}");
            cat_add_post(l, count == 16 ? "stop_16_strings" : "stop_17_strings", CAT_MAIN,
                         "/v1/completions", NULL, b, n, count == 16 ? "200" : "400",
                         count == 16 ? "ok" : "param=stop");
        }
        for (int len = 512; len <= 513; len++) {
            size_t n = (size_t)snprintf(b, sizeof(b), "{\"prompt\":\"x\",\"max_tokens\":2,\"stop\":\"");
            memset(b + n, 'q', (size_t)len);
            n += (size_t)len;
            n += (size_t)snprintf(b + n, sizeof(b) - n, "\"}");
            cat_add_post(l, len == 512 ? "stop_len_512" : "stop_len_513", CAT_MAIN,
                         "/v1/completions", NULL, b, n, len == 512 ? "200" : "400",
                         len == 512 ? "ok" : "param=stop");
        }
    }
}
