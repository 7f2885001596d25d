/* gw_responses: POST /v1/responses over the chat generation path (gw_openai with a sink).
 *   map (Responses body -> chat body) -> gw_openai_generate_sink -> deltas -> output items
 *   -> one Response object, or the API's SSE events with sequence_number.
 * Unknown fields are ignored, as on the chat endpoint; see docs/API.md. */
#include "gw_responses.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "gw.h"
#include "gw_arena.h"
#include "gw_exch.h"
#include "gw_openai.h"
#include "gw_out.h"

// ---- request: Responses body -> chat body ----

static int fail(struct gw_req_err *err, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct gw_req_err *err, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = gw_req_err_vset(err, 400, param, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

static const char *str_field(const cJSON *obj, const char *name)
{
    cJSON *it = gw_req_field(obj, name);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static const char *path(struct gw_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* a param path ("input[2].content[0].type") in the arena */
static const char *path(struct gw_arena *a, const char *fmt, ...)
{
    char p[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof(p), fmt, ap);
    va_end(ap);
    return gw_arena_strdup(a, p);
}

/* Fields passed to the chat parser under the same name (it validates them). */
static const char *const same_name[] = {
    "model", "stream", "temperature", "top_p", "parallel_tool_calls",
    /* vLLM-style extras the chat endpoint takes */
    "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty", "repetition_penalty", "stop",
    "chat_template_kwargs"};

/* The other top-level keys of a Responses body that map_rest, map_input and map_tools read.
 * With same_name: every field tern knows (docs/API.md "Field list"); any other key is
 * ignored and named in a warning (gw_responses_unknown_fields). */
static const char *const own_name[] = {
    "instructions", "input",      "tools", "tool_choice", "previous_response_id", "conversation",
    "background",   "store",      "user",  "metadata",    "text",                 "reasoning",
    "max_output_tokens"};

const char *gw_responses_known_field(size_t i)
{
    if (i < ARRAY_LEN(same_name))
        return same_name[i];
    i -= ARRAY_LEN(same_name);
    return i < ARRAY_LEN(own_name) ? own_name[i] : NULL;
}

static bool resp_is_known(const char *name, const void *ctx)
{
    (void)ctx;
    const char *k;
    for (size_t i = 0; (k = gw_responses_known_field(i)); i++)
        if (strcmp(k, name) == 0)
            return true;
    return false;
}

int gw_responses_unknown_fields(const cJSON *root, char *out, size_t cap)
{
    return gw_req_unknown_keys(root, resp_is_known, NULL, out, cap);
}

/* A message's content: a string, or parts of type input_text / output_text -> chat text parts. */
static int map_content(const cJSON *content, int i, struct gw_arena *a, cJSON **out,
                       struct gw_req_err *err)
{
    if (cJSON_IsString(content)) {
        *out = cJSON_CreateString(content->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(content))
        return fail(err, path(a, "input[%d].content", i),
                    "input[%d].content must be a string or a list of input_text parts", i);
    cJSON *parts = cJSON_CreateArray();
    cJSON *p;
    int j = 0;
    cJSON_ArrayForEach(p, content)
    {
        const char *type = cJSON_IsObject(p) ? str_field(p, "type") : NULL;
        const char *text = cJSON_IsObject(p) ? str_field(p, "text") : NULL;
        if (!type || (strcmp(type, "input_text") && strcmp(type, "output_text"))) {
            cJSON_Delete(parts);
            return fail(err, path(a, "input[%d].content[%d].type", i, j),
                        "input[%d].content[%d]: part type '%.40s' is not supported (input_text, "
                        "output_text)",
                        i, j, type ? type : "(none)");
        }
        if (!text) {
            cJSON_Delete(parts);
            return fail(err, path(a, "input[%d].content[%d].text", i, j),
                        "input[%d].content[%d].text must be a string", i, j);
        }
        cJSON *q = cJSON_CreateObject();
        cJSON_AddStringToObject(q, "type", "text");
        cJSON_AddStringToObject(q, "text", text);
        cJSON_AddItemToArray(parts, q);
        j++;
    }
    *out = parts;
    return 0;
}

/* reasoning item text (content[].text, else summary[].text), appended to *acc */
static void reasoning_text(const cJSON *item, struct buf *acc)
{
    const cJSON *list = gw_req_field(item, "content");
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        list = gw_req_field(item, "summary");
    if (!cJSON_IsArray(list))
        return;
    const cJSON *p;
    cJSON_ArrayForEach(p, list)
    {
        const char *t = str_field(p, "text");
        if (t)
            buf_puts(acc, t);
    }
}

/* the assistant message that function_call items join: the last message when it is one */
static cJSON *assistant_for_call(cJSON *msgs)
{
    int n = cJSON_GetArraySize(msgs);
    cJSON *last = n ? cJSON_GetArrayItem(msgs, n - 1) : NULL;
    const char *role = last ? str_field(last, "role") : NULL;
    if (role && strcmp(role, "assistant") == 0)
        return last;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "content", "");
    cJSON_AddItemToArray(msgs, m);
    return m;
}

static int map_item(const cJSON *it, int i, cJSON *msgs, struct buf *reasoning, struct gw_arena *a,
                    struct gw_req_err *err)
{
    if (!cJSON_IsObject(it))
        return fail(err, path(a, "input[%d]", i), "input[%d] must be an object", i);
    const char *type = str_field(it, "type");
    if (!type || strcmp(type, "message") == 0) {
        static const char *const roles[] = {"user", "system", "developer", "assistant"};
        const char *role = str_field(it, "role");
        bool known = false;
        for (size_t k = 0; role && k < ARRAY_LEN(roles); k++)
            known |= strcmp(role, roles[k]) == 0;
        if (!known)
            return fail(err, path(a, "input[%d].role", i),
                        "input[%d].role must be user, system, developer or assistant", i);
        cJSON *content = NULL;
        int rc = map_content(gw_req_field(it, "content"), i, a, &content, err);
        if (rc)
            return rc;
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", role);
        cJSON_AddItemToObject(m, "content", content);
        if (strcmp(role, "assistant") == 0 && reasoning->len) {
            cJSON_AddStringToObject(m, "reasoning_content", reasoning->data);
            buf_reset(reasoning);
        }
        cJSON_AddItemToArray(msgs, m);
        return 0;
    }
    if (strcmp(type, "function_call") == 0) {
        static const char *const need[] = {"call_id", "name", "arguments"};
        for (size_t k = 0; k < ARRAY_LEN(need); k++)
            if (!str_field(it, need[k]))
                return fail(err, path(a, "input[%d].%s", i, need[k]),
                            "input[%d].%s must be a string", i, need[k]);
        cJSON *m = assistant_for_call(msgs);
        if (reasoning->len) {
            cJSON_DeleteItemFromObjectCaseSensitive(m, "reasoning_content");
            cJSON_AddStringToObject(m, "reasoning_content", reasoning->data);
            buf_reset(reasoning);
        }
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (!calls)
            calls = cJSON_AddArrayToObject(m, "tool_calls");
        cJSON *tc = cJSON_CreateObject();
        cJSON_AddStringToObject(tc, "id", str_field(it, "call_id"));
        cJSON_AddStringToObject(tc, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(tc, "function");
        cJSON_AddStringToObject(fn, "name", str_field(it, "name"));
        cJSON_AddStringToObject(fn, "arguments", str_field(it, "arguments"));
        cJSON_AddItemToArray(calls, tc);
        return 0;
    }
    if (strcmp(type, "function_call_output") == 0) {
        const char *call_id = str_field(it, "call_id");
        if (!call_id)
            return fail(err, path(a, "input[%d].call_id", i), "input[%d].call_id must be a string",
                        i);
        cJSON *out = gw_req_field(it, "output");
        cJSON *content = NULL;
        if (!out)
            return fail(err, path(a, "input[%d].output", i), "input[%d].output is required", i);
        int rc = map_content(out, i, a, &content, err);
        if (rc) {
            err->param = path(a, "input[%d].output", i);
            return rc;
        }
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "tool");
        cJSON_AddStringToObject(m, "tool_call_id", call_id);
        cJSON_AddItemToObject(m, "content", content);
        cJSON_AddItemToArray(msgs, m);
        return 0;
    }
    if (strcmp(type, "reasoning") == 0) {
        reasoning_text(it, reasoning); /* goes with the next assistant message */
        return 0;
    }
    return fail(err, path(a, "input[%d].type", i),
                "input[%d]: item type '%.40s' is not supported (message, function_call, "
                "function_call_output, reasoning)",
                i, type);
}

static int map_input(const cJSON *root, cJSON *chat, struct gw_arena *a, struct gw_req_err *err)
{
    cJSON *msgs = cJSON_AddArrayToObject(chat, "messages");
    cJSON *ins = cJSON_GetObjectItemCaseSensitive(root, "instructions");
    if (ins && !cJSON_IsNull(ins)) {
        if (!cJSON_IsString(ins))
            return fail(err, "instructions", "'instructions' must be a string");
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", ins->valuestring);
        cJSON_AddItemToArray(msgs, m);
    }
    cJSON *in = gw_req_field(root, "input");
    if (!in)
        return fail(err, "input", "'input' is required");
    if (cJSON_IsString(in)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", in->valuestring);
        cJSON_AddItemToArray(msgs, m);
        return 0;
    }
    if (!cJSON_IsArray(in) || cJSON_GetArraySize(in) == 0)
        return fail(err, "input", "'input' must be a string or a non-empty list of input items");
    struct buf reasoning;
    buf_init(&reasoning);
    cJSON *it;
    int i = 0, rc = 0;
    cJSON_ArrayForEach(it, in)
    {
        if ((rc = map_item(it, i++, msgs, &reasoning, a, err)))
            break;
    }
    buf_deinit(&reasoning);
    if (!rc && cJSON_GetArraySize(msgs) == 0)
        rc = fail(err, "input", "'input' has no message");
    return rc;
}

/* flat function tools {type, name, description, parameters, strict} -> chat tools */
static int map_tools(const cJSON *root, cJSON *chat, struct gw_arena *a, struct gw_req_err *err)
{
    cJSON *tools = gw_req_field(root, "tools");
    if (tools) {
        if (!cJSON_IsArray(tools))
            return fail(err, "tools", "'tools' must be a list");
        cJSON *out = cJSON_AddArrayToObject(chat, "tools");
        cJSON *t;
        int i = 0;
        cJSON_ArrayForEach(t, tools)
        {
            const char *type = cJSON_IsObject(t) ? str_field(t, "type") : NULL;
            const char *name = cJSON_IsObject(t) ? str_field(t, "name") : NULL;
            if (!type || strcmp(type, "function") != 0)
                return fail(err, path(a, "tools[%d].type", i),
                            "tools[%d]: tool type '%.40s' is not supported (function)", i,
                            type ? type : "(none)");
            if (!name || !name[0])
                return fail(err, path(a, "tools[%d].name", i),
                            "tools[%d].name must be a non-empty string", i);
            cJSON *ct = cJSON_CreateObject();
            cJSON_AddStringToObject(ct, "type", "function");
            cJSON *fn = cJSON_AddObjectToObject(ct, "function");
            cJSON_AddStringToObject(fn, "name", name);
            static const char *const keep[] = {"description", "parameters", "strict"};
            for (size_t k = 0; k < ARRAY_LEN(keep); k++) {
                cJSON *v = gw_req_field(t, keep[k]);
                if (v)
                    cJSON_AddItemToObject(fn, keep[k], cJSON_Duplicate(v, true));
            }
            cJSON_AddItemToArray(out, ct);
            i++;
        }
    }
    cJSON *tc = gw_req_field(root, "tool_choice");
    if (!tc)
        return 0;
    if (cJSON_IsString(tc)) {
        cJSON_AddStringToObject(chat, "tool_choice", tc->valuestring);
        return 0;
    }
    const char *type = cJSON_IsObject(tc) ? str_field(tc, "type") : NULL;
    const char *name = cJSON_IsObject(tc) ? str_field(tc, "name") : NULL;
    if (!type || strcmp(type, "function") != 0 || !name)
        return fail(err, "tool_choice",
                    "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                    "{\"type\":\"function\",\"name\":...}");
    cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice");
    cJSON_AddStringToObject(c, "type", "function");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "name", name);
    return 0;
}

/* text, reasoning, metadata, store, user, and what a stateless server cannot do */
static int map_rest(const cJSON *root, cJSON *chat, struct gw_req_err *err)
{
    static const char *const stateful[] = {"previous_response_id", "conversation"};
    for (size_t k = 0; k < ARRAY_LEN(stateful); k++)
        if (gw_req_field(root, stateful[k]))
            return fail(err, stateful[k],
                        "'%s' is not supported: tern's /v1/responses is stateless (nothing is "
                        "stored); send the whole conversation in 'input'",
                        stateful[k]);
    cJSON *bg = gw_req_field(root, "background");
    if (bg && !cJSON_IsFalse(bg))
        return fail(err, "background", "'background' responses are not supported (stateless)");
    cJSON *store = gw_req_field(root, "store");
    if (store && !cJSON_IsBool(store))
        return fail(err, "store", "'store' must be a boolean");
    cJSON *user = gw_req_field(root, "user");
    if (user && !cJSON_IsString(user))
        return fail(err, "user", "'user' must be a string");
    cJSON *md = gw_req_field(root, "metadata");
    if (md) {
        if (!cJSON_IsObject(md))
            return fail(err, "metadata", "'metadata' must be an object of strings");
        cJSON *v;
        cJSON_ArrayForEach(v, md)
        {
            if (!cJSON_IsString(v))
                return fail(err, "metadata", "'metadata' must be an object of strings");
        }
    }
    cJSON *text = gw_req_field(root, "text");
    if (text) {
        if (!cJSON_IsObject(text))
            return fail(err, "text", "'text' must be an object");
        cJSON *fmt = gw_req_field(text, "format");
        if (fmt) {
            const char *t = cJSON_IsObject(fmt) ? str_field(fmt, "type") : NULL;
            if (!t)
                return fail(err, "text.format", "'text.format.type' is required");
            if (strcmp(t, "text") != 0)
                return fail(err, "text.format", "text.format '%.32s' is not supported yet", t);
        }
    }
    cJSON *rs = gw_req_field(root, "reasoning");
    if (rs) {
        if (!cJSON_IsObject(rs))
            return fail(err, "reasoning", "'reasoning' must be an object");
        cJSON *eff = gw_req_field(rs, "effort");
        if (eff) { /* chat's reasoning_effort: "none" turns thinking off */
            static const char *const ok[] = {"none", "minimal", "low", "medium", "high"};
            bool known = false;
            for (size_t k = 0; cJSON_IsString(eff) && k < ARRAY_LEN(ok); k++)
                known |= strcmp(eff->valuestring, ok[k]) == 0;
            if (!known)
                return fail(err, "reasoning.effort",
                            "'reasoning.effort' must be one of none, minimal, low, medium, high");
            cJSON_AddItemToObject(chat, "reasoning_effort", cJSON_Duplicate(eff, true));
        }
    }
    cJSON *mot = gw_req_field(root, "max_output_tokens");
    if (mot) {
        double v = mot->valuedouble;
        if (!cJSON_IsNumber(mot) || v != (double)(int64_t)v || v < 1 || v > INT32_MAX)
            return fail(err, "max_output_tokens",
                        "'max_output_tokens' must be an integer in [1, %d]", INT32_MAX);
        cJSON_AddItemToObject(chat, "max_completion_tokens", cJSON_Duplicate(mot, true));
    }
    return 0;
}

int gw_responses_map(const char *body, size_t len, struct gw_arena *a, char **chat_body,
                     size_t *chat_len, cJSON **root_out, struct gw_req_err *err)
{
    memset(err, 0, sizeof(*err));
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root)
        return fail(err, NULL, "request body is not valid JSON");
    gw_arena_cleanup_add(a, gw_req_free_json, root);
    *root_out = root;
    if (!cJSON_IsObject(root))
        return fail(err, NULL, "request body must be a JSON object");
    cJSON *chat = cJSON_CreateObject();
    for (size_t k = 0; k < ARRAY_LEN(same_name); k++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(root, same_name[k]);
        if (v)
            cJSON_AddItemToObject(chat, same_name[k], cJSON_Duplicate(v, true));
    }
    int rc;
    if ((rc = map_rest(root, chat, err)) || (rc = map_input(root, chat, a, err)) ||
        (rc = map_tools(root, chat, a, err))) {
        cJSON_Delete(chat);
        return rc;
    }
    char *s = cJSON_PrintUnformatted(chat);
    cJSON_Delete(chat);
    *chat_len = strlen(s);
    *chat_body = gw_arena_strndup(a, s, *chat_len);
    free(s);
    return 0;
}

const char *gw_responses_param(const char *p)
{
    static const char *const map[][2] = {
        {"messages", "input"},
        {"max_completion_tokens", "max_output_tokens"},
        {"max_tokens", "max_output_tokens"},
        {"reasoning_effort", "reasoning.effort"},
        {"response_format", "text.format"},
    };
    for (size_t i = 0; i < ARRAY_LEN(map); i++)
        if (strcmp(p, map[i][0]) == 0)
            return map[i][1];
    return p;
}

// ---- response: output items, the Response object, events ----

void gw_resp_init(struct gw_resp *r, const cJSON *req, const char *id_tail, const char *model,
                  long long created_at, bool stream)
{
    memset(r, 0, sizeof(*r));
    r->req = req;
    snprintf(r->id, sizeof(r->id), "resp_%.80s", id_tail);
    r->model = model;
    r->created_at = created_at;
    r->stream = stream;
    r->open = -1;
}

void gw_resp_deinit(struct gw_resp *r)
{
    for (int i = 0; i < r->n_items; i++)
        buf_deinit(&r->items[i].text);
    free(r->items);
    r->items = NULL;
    r->n_items = r->cap_items = 0;
}

static const char *text_of(const struct gw_resp_item *it)
{
    return it->text.data ? it->text.data : "";
}

static cJSON *part_json(const struct gw_resp_item *it, bool empty)
{
    cJSON *p = cJSON_CreateObject();
    bool msg = it->type == GW_RESP_ITEM_MESSAGE;
    cJSON_AddStringToObject(p, "type", msg ? "output_text" : "reasoning_text");
    cJSON_AddStringToObject(p, "text", empty ? "" : text_of(it));
    if (msg) {
        cJSON_AddArrayToObject(p, "annotations");
        cJSON_AddArrayToObject(p, "logprobs");
    }
    return p;
}

/* the item as output[] holds it; added: the shape of output_item.added (empty) */
static cJSON *item_json(const struct gw_resp_item *it, bool added, const char *status)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", it->id);
    static const char *const types[] = {"reasoning", "message", "function_call"};
    cJSON_AddStringToObject(j, "type", types[it->type]);
    if (it->type == GW_RESP_ITEM_REASONING)
        cJSON_AddArrayToObject(j, "summary");
    if (it->type == GW_RESP_ITEM_MESSAGE)
        cJSON_AddStringToObject(j, "role", "assistant");
    if (it->type != GW_RESP_ITEM_FUNCTION_CALL) {
        cJSON *c = cJSON_AddArrayToObject(j, "content");
        if (!added)
            cJSON_AddItemToArray(c, part_json(it, false));
    } else {
        cJSON_AddStringToObject(j, "call_id", it->call_id);
        cJSON_AddStringToObject(j, "name", it->name);
        cJSON_AddStringToObject(j, "arguments", added ? "" : text_of(it));
    }
    cJSON_AddStringToObject(j, "status", added ? "in_progress" : status);
    return j;
}

static cJSON *ev_new(struct gw_resp *r, const char *type)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "type", type);
    cJSON_AddNumberToObject(j, "sequence_number", r->seq++);
    return j;
}

/* "event: TYPE\ndata: JSON\n\n" */
static void ev_send(struct buf *out, cJSON *ev)
{
    char *s = cJSON_PrintUnformatted(ev);
    buf_printf(out, "event: %s\ndata: %s\n\n",
               cJSON_GetObjectItemCaseSensitive(ev, "type")->valuestring, s);
    free(s);
    cJSON_Delete(ev);
}

static cJSON *ev_item(struct gw_resp *r, const char *type, int idx)
{
    cJSON *ev = ev_new(r, type);
    if (strstr(type, "output_item") == NULL)
        cJSON_AddStringToObject(ev, "item_id", r->items[idx].id);
    cJSON_AddNumberToObject(ev, "output_index", idx);
    return ev;
}

static void copy_or_null(cJSON *dst, const char *name, const cJSON *v)
{
    if (v && !cJSON_IsNull(v))
        cJSON_AddItemToObject(dst, name, cJSON_Duplicate(v, true));
    else
        cJSON_AddNullToObject(dst, name);
}

/* the Response object; status "in_progress" (no usage) or final */
static cJSON *response_json(const struct gw_resp *r, const char *status, const char *reason,
                            uint32_t in, uint32_t out, const struct gw_req *chat)
{
    const cJSON *q = r->req;
    bool final = strcmp(status, "in_progress") != 0;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", r->id);
    cJSON_AddStringToObject(j, "object", "response");
    cJSON_AddNumberToObject(j, "created_at", (double)r->created_at);
    cJSON_AddStringToObject(j, "status", status);
    cJSON_AddBoolToObject(j, "background", false);
    cJSON_AddNullToObject(j, "error");
    if (reason)
        cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "incomplete_details"), "reason", reason);
    else
        cJSON_AddNullToObject(j, "incomplete_details");
    copy_or_null(j, "instructions", gw_req_field(q, "instructions"));
    copy_or_null(j, "max_output_tokens", gw_req_field(q, "max_output_tokens"));
    cJSON_AddStringToObject(j, "model", r->model);
    cJSON *output = cJSON_AddArrayToObject(j, "output");
    for (int i = 0; final && i < r->n_items; i++) {
        bool cut = reason && i == r->n_items - 1;
        cJSON_AddItemToArray(output,
                             item_json(&r->items[i], false, cut ? "incomplete" : "completed"));
    }
    cJSON *ptc = gw_req_field(q, "parallel_tool_calls");
    cJSON_AddBoolToObject(j, "parallel_tool_calls",
                          chat ? chat->parallel_tool_calls : !cJSON_IsFalse(ptc));
    cJSON_AddNullToObject(j, "previous_response_id");
    cJSON *rs = cJSON_AddObjectToObject(j, "reasoning");
    copy_or_null(rs, "effort", gw_req_field(gw_req_field(q, "reasoning"), "effort"));
    cJSON_AddNullToObject(rs, "summary");
    cJSON_AddBoolToObject(j, "store", false); /* stateless: nothing is stored */
    if (chat) {
        cJSON_AddNumberToObject(j, "temperature", chat->temperature);
        cJSON_AddNumberToObject(j, "top_p", chat->top_p);
    } else {
        copy_or_null(j, "temperature", gw_req_field(q, "temperature"));
        copy_or_null(j, "top_p", gw_req_field(q, "top_p"));
    }
    cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(j, "text"), "format"),
                            "type", "text");
    cJSON *tc = gw_req_field(q, "tool_choice");
    if (tc)
        cJSON_AddItemToObject(j, "tool_choice", cJSON_Duplicate(tc, true));
    else
        cJSON_AddStringToObject(j, "tool_choice", "auto");
    cJSON *tools = gw_req_field(q, "tools");
    if (tools)
        cJSON_AddItemToObject(j, "tools", cJSON_Duplicate(tools, true));
    else
        cJSON_AddArrayToObject(j, "tools");
    cJSON_AddStringToObject(j, "truncation", "disabled");
    if (final) {
        cJSON *u = cJSON_AddObjectToObject(j, "usage");
        cJSON_AddNumberToObject(u, "input_tokens", in);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens",
                                0);
        cJSON_AddNumberToObject(u, "output_tokens", out);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"),
                                "reasoning_tokens", 0); /* not counted separately */
        cJSON_AddNumberToObject(u, "total_tokens", (double)in + out);
    } else {
        cJSON_AddNullToObject(j, "usage");
    }
    copy_or_null(j, "user", gw_req_field(q, "user"));
    cJSON *md = gw_req_field(q, "metadata");
    if (md)
        cJSON_AddItemToObject(j, "metadata", cJSON_Duplicate(md, true));
    else
        cJSON_AddObjectToObject(j, "metadata");
    return j;
}

void gw_resp_begin(struct gw_resp *r, struct buf *out)
{
    static const char *const evs[] = {"response.created", "response.in_progress"};
    for (size_t i = 0; i < ARRAY_LEN(evs); i++) {
        cJSON *ev = ev_new(r, evs[i]);
        cJSON_AddItemToObject(ev, "response", response_json(r, "in_progress", NULL, 0, 0, NULL));
        ev_send(out, ev);
    }
}

/* close the open item: its *.done events */
static void item_close(struct gw_resp *r, const char *status, struct buf *out)
{
    if (r->open < 0)
        return;
    int idx = r->open;
    struct gw_resp_item *it = &r->items[idx];
    r->open = -1;
    it->done = true;
    if (!out)
        return;
    cJSON *ev;
    if (it->type == GW_RESP_ITEM_FUNCTION_CALL) {
        ev = ev_item(r, "response.function_call_arguments.done", idx);
        cJSON_AddStringToObject(ev, "name", it->name);
        cJSON_AddStringToObject(ev, "arguments", text_of(it));
        ev_send(out, ev);
    } else {
        bool msg = it->type == GW_RESP_ITEM_MESSAGE;
        ev = ev_item(r, msg ? "response.output_text.done" : "response.reasoning_text.done", idx);
        cJSON_AddNumberToObject(ev, "content_index", 0);
        cJSON_AddStringToObject(ev, "text", text_of(it));
        if (msg)
            cJSON_AddArrayToObject(ev, "logprobs");
        ev_send(out, ev);
        ev = ev_item(r, "response.content_part.done", idx);
        cJSON_AddNumberToObject(ev, "content_index", 0);
        cJSON_AddItemToObject(ev, "part", part_json(it, false));
        ev_send(out, ev);
    }
    ev = ev_item(r, "response.output_item.done", idx);
    cJSON_AddItemToObject(ev, "item", item_json(it, false, status));
    ev_send(out, ev);
}

/* close the open item and start a new one of type */
static struct gw_resp_item *item_open(struct gw_resp *r, enum gw_resp_item_type type,
                                      const struct gw_out_tool_ev *tool, struct buf *out)
{
    item_close(r, "completed", out);
    if (r->n_items == r->cap_items) {
        r->cap_items = r->cap_items ? 2 * r->cap_items : 4;
        r->items = xrealloc(r->items, sizeof(*r->items) * (size_t)r->cap_items);
    }
    int idx = r->n_items++;
    struct gw_resp_item *it = &r->items[idx];
    memset(it, 0, sizeof(*it));
    it->type = type;
    buf_init(&it->text);
    static const char *const prefix[] = {"rs", "msg", "fc"};
    snprintf(it->id, sizeof(it->id), "%s_%.80s_%d", prefix[type], r->id + 5, idx);
    if (tool) {
        snprintf(it->call_id, sizeof(it->call_id), "%s", tool->id);
        snprintf(it->name, sizeof(it->name), "%s", tool->name);
        it->tool_index = tool->index;
    }
    r->open = idx;
    if (!out)
        return it;
    cJSON *ev = ev_new(r, "response.output_item.added");
    cJSON_AddNumberToObject(ev, "output_index", idx);
    cJSON_AddItemToObject(ev, "item", item_json(it, true, NULL));
    ev_send(out, ev);
    if (type != GW_RESP_ITEM_FUNCTION_CALL) {
        ev = ev_item(r, "response.content_part.added", idx);
        cJSON_AddNumberToObject(ev, "content_index", 0);
        cJSON_AddItemToObject(ev, "part", part_json(it, true));
        ev_send(out, ev);
    }
    return it;
}

/* text for an item of type (opened when another kind is open) */
static void add_text(struct gw_resp *r, enum gw_resp_item_type type, const struct buf *t,
                     struct buf *out)
{
    if (!t->len)
        return;
    struct gw_resp_item *it = r->open >= 0 && r->items[r->open].type == type
                                  ? &r->items[r->open]
                                  : item_open(r, type, NULL, out);
    buf_append(&it->text, t->data, t->len);
    if (!out)
        return;
    bool msg = type == GW_RESP_ITEM_MESSAGE;
    cJSON *ev =
        ev_item(r, msg ? "response.output_text.delta" : "response.reasoning_text.delta", r->open);
    cJSON_AddNumberToObject(ev, "content_index", 0);
    cJSON_AddStringToObject(ev, "delta", t->data);
    if (msg)
        cJSON_AddArrayToObject(ev, "logprobs");
    ev_send(out, ev);
}

void gw_resp_delta(struct gw_resp *r, const struct gw_out_delta *d, struct buf *out)
{
    add_text(r, GW_RESP_ITEM_REASONING, &d->reasoning, out);
    add_text(r, GW_RESP_ITEM_MESSAGE, &d->content, out);
    for (int i = 0; i < d->n_tools; i++) {
        const struct gw_out_tool_ev *t = &d->tools[i];
        if (t->id[0] || t->name[0])
            item_open(r, GW_RESP_ITEM_FUNCTION_CALL, t, out);
        int idx = -1;
        for (int k = r->n_items - 1; k >= 0 && idx < 0; k--)
            if (r->items[k].type == GW_RESP_ITEM_FUNCTION_CALL &&
                r->items[k].tool_index == t->index)
                idx = k;
        if (idx < 0 || !t->args.len)
            continue;
        buf_append(&r->items[idx].text, t->args.data, t->args.len);
        if (out) {
            cJSON *ev = ev_item(r, "response.function_call_arguments.delta", idx);
            cJSON_AddStringToObject(ev, "delta", t->args.data);
            ev_send(out, ev);
        }
    }
}

char *gw_resp_end(struct gw_resp *r, const char *finish, uint32_t in, uint32_t out_tokens,
                  const struct gw_req *chat, struct buf *out)
{
    const char *reason = NULL, *status = "completed";
    if (strcmp(finish, "length") == 0) {
        status = "incomplete";
        reason = "max_output_tokens";
    } else if (strcmp(finish, "abort") == 0) {
        status = "incomplete";
    }
    bool answered = false;
    for (int i = 0; i < r->n_items; i++)
        answered |= r->items[i].type != GW_RESP_ITEM_REASONING;
    if (!answered) /* output_text is "" rather than absent */
        item_open(r, GW_RESP_ITEM_MESSAGE, NULL, out);
    item_close(r, reason ? "incomplete" : "completed", out);
    cJSON *resp = response_json(r, status, reason, in, out_tokens, chat);
    if (!out) {
        char *s = cJSON_PrintUnformatted(resp);
        cJSON_Delete(resp);
        return s;
    }
    cJSON *ev = ev_new(r, reason || strcmp(status, "completed") ? "response.incomplete"
                                                                : "response.completed");
    cJSON_AddItemToObject(ev, "response", resp);
    ev_send(out, ev);
    return NULL;
}

void gw_resp_error_event(struct gw_resp *r, const cJSON *error, struct buf *out)
{
    cJSON *ev = ev_new(r, "error");
    static const char *const keys[] = {"code", "message", "param"};
    for (size_t k = 0; k < ARRAY_LEN(keys); k++)
        copy_or_null(ev, keys[k], cJSON_GetObjectItemCaseSensitive(error, keys[k]));
    ev_send(out, ev);
}

// ---- the endpoint ----

struct resp_ctx {
    struct gw_resp resp;
    struct gw_openai_sink sink;
};

static void resp_cleanup(void *p)
{
    struct resp_ctx *c = p;
    gw_resp_deinit(&c->resp);
}

static void send_buf(struct gw_exch *x, struct buf *b)
{
    gw_exch_stream_send(x, b->data, b->len);
    buf_deinit(b);
}

static void sink_begin(void *ctx, struct gw_exch *x)
{
    struct resp_ctx *c = ctx;
    struct buf b;
    buf_init(&b);
    gw_resp_begin(&c->resp, &b);
    send_buf(x, &b);
}

static void sink_delta(void *ctx, struct gw_exch *x, const struct gw_out_delta *d)
{
    struct resp_ctx *c = ctx;
    if (!c->resp.stream) {
        gw_resp_delta(&c->resp, d, NULL);
        return;
    }
    struct buf b;
    buf_init(&b);
    gw_resp_delta(&c->resp, d, &b);
    send_buf(x, &b);
}

static void sink_end(void *ctx, struct gw_exch *x, const struct gw_openai_result *res)
{
    struct resp_ctx *c = ctx;
    if (!c->resp.stream) {
        char *s = gw_resp_end(&c->resp, res->finish, res->prompt_tokens, res->completion_tokens,
                              res->req, NULL);
        gw_exch_respond(x, 200, "application/json", NULL, s, strlen(s));
        free(s);
        return;
    }
    struct buf b;
    buf_init(&b);
    gw_resp_end(&c->resp, res->finish, res->prompt_tokens, res->completion_tokens, res->req, &b);
    send_buf(x, &b);
    gw_exch_stream_end(x);
}

static void stream_error(void *ctx, const cJSON *error, struct buf *out)
{
    struct resp_ctx *c = ctx;
    gw_resp_error_event(&c->resp, error, out);
}

void gw_responses_handle(struct gw *gw, struct gw_exch *x)
{
    char *chat = NULL;
    size_t n = 0;
    cJSON *root = NULL;
    struct gw_req_err e;
    if (gw_responses_map(x->body, x->body_len, x->arena, &chat, &n, &root, &e) < 0) {
        gw_exch_error(x, e.status, e.type, e.param, e.code, NULL, "%s", e.message);
        return;
    }
    char unknown[256];
    uint32_t sup;
    if (gw_responses_unknown_fields(root, unknown, sizeof(unknown)) > 0 &&
        log_limit_ok(&gw->unknown_fields_warn[2], clock_now_ms(), GW_WARN_INTERVAL_MS, &sup))
        LOG_WARN("request_fields_ignored", "req=%s endpoint=responses fields=%s suppressed=%u",
                 x->req_id, unknown, sup);
    struct resp_ctx *c = gw_arena_alloc(x->arena, sizeof(*c));
    gw_resp_init(&c->resp, root, x->req_id, gw_openai_model(gw), (long long)time(NULL),
                 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream")));
    gw_arena_cleanup_add(x->arena, resp_cleanup, c);
    c->sink = (struct gw_openai_sink){.ctx = c,
                                      .begin = sink_begin,
                                      .delta = sink_delta,
                                      .end = sink_end,
                                      .param = gw_responses_param};
    x->on_stream_error = stream_error;
    x->stream_error_ctx = c;
    gw_openai_generate_sink(gw, x, chat, n, &c->sink);
}
