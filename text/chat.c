/* chat: OpenAI request -> template variables -> prompt. Owns the vLLM-style normalisation of
 * messages (tool-call arguments parsed from JSON strings, reasoning -> reasoning_content, text
 * parts joined or passed through) and the loading of templates from tokenizer_config.json. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "jinja_internal.h"
#include "text/chat.h"

struct chat_template {
    struct jinja_template *tpl;
    bool content_as_parts;      // the template loops over content itself
    struct jarena arena;        // special tokens
    struct jinja_value special; // JV_DICT: bos_token, eos_token, ...
};

static int set_err(struct jinja_error *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int set_err(struct jinja_error *err, int rc, const char *fmt, ...)
{
    va_list ap;
    err->line = 0;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return rc;
}

struct chat_template *chat_template_create(const char *src, size_t len, struct jinja_error *err)
{
    struct jinja_template *tpl = jinja_template_create(src, len, err);
    if (!tpl)
        return NULL;
    struct chat_template *t = xcalloc(1, sizeof(*t));
    t->tpl = tpl;
    t->content_as_parts = jinja_template_loops_over_message_content(tpl);
    ja_init(&t->arena);
    t->special = jv_dict_new(&t->arena, 8);
    return t;
}

void chat_template_destroy(struct chat_template *t)
{
    if (!t)
        return;
    jinja_template_destroy(t->tpl);
    ja_deinit(&t->arena);
    free(t);
}

/* A special token is a string or an AddedToken object {"content": ...}. */
static bool token_text(struct jinja_value v, struct jinja_value *out)
{
    if (v.kind == JV_STR) {
        *out = v;
        return true;
    }
    if (v.kind == JV_DICT) {
        struct jinja_value *c = jv_dict_get(v.u.dict, "content", 7);
        if (c && c->kind == JV_STR) {
            *out = *c;
            return true;
        }
    }
    return false;
}

static void take_special_tokens(struct chat_template *t, struct jinja_value cfg)
{
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        struct jinja_value *v = jv_dict_get(cfg.u.dict, keys[i], strlen(keys[i]));
        struct jinja_value s;
        if (v && token_text(*v, &s))
            jv_dict_set(&t->arena, t->special.u.dict,
                        jv_strdup(&t->arena, keys[i], strlen(keys[i])),
                        jv_strdup(&t->arena, s.u.s.s, s.u.s.n));
    }
    struct jinja_value *add = jv_dict_get(cfg.u.dict, "additional_special_tokens", 25);
    if (add && add->kind == JV_LIST) {
        struct jinja_value l = jv_list_new(&t->arena, add->u.list->n);
        for (size_t i = 0; i < add->u.list->n; i++) {
            struct jinja_value s;
            if (token_text(add->u.list->v[i], &s))
                jv_list_push(&t->arena, l.u.list, jv_strdup(&t->arena, s.u.s.s, s.u.s.n));
        }
        jv_dict_set(&t->arena, t->special.u.dict,
                    jv_strdup(&t->arena, "additional_special_tokens", 25), l);
    }
}

/* Parse a tokenizer_config.json; with template_src NULL the template comes from it, otherwise
 * template_src is the template and the config only gives the special tokens. */
static struct chat_template *from_config(const char *json, size_t len, const char *template_src,
                                         size_t template_len, struct jinja_error *err)
{
    struct jarena a;
    struct jinja_value cfg;
    struct chat_template *t = NULL;
    ja_init(&a);
    err->line = 0;
    if (jv_json_parse(&a, json, len, &cfg, err->msg, sizeof(err->msg)) < 0)
        goto out;
    if (cfg.kind != JV_DICT) {
        set_err(err, ERR_FORMAT, "tokenizer_config.json is not an object");
        goto out;
    }
    struct jinja_value src = {0};
    if (template_src) {
        src = jv_str(template_src, template_len);
    } else {
        struct jinja_value *ct = jv_dict_get(cfg.u.dict, "chat_template", 13);
        if (ct && ct->kind == JV_STR) {
            src = *ct;
        } else if (ct && ct->kind == JV_LIST) {
            for (size_t i = 0; i < ct->u.list->n; i++) {
                struct jinja_value e = ct->u.list->v[i];
                struct jinja_value *nm =
                    e.kind == JV_DICT ? jv_dict_get(e.u.dict, "name", 4) : NULL;
                struct jinja_value *tx =
                    e.kind == JV_DICT ? jv_dict_get(e.u.dict, "template", 8) : NULL;
                if (nm && jv_is_str(*nm, "default") && tx && tx->kind == JV_STR)
                    src = *tx;
            }
        }
    }
    if (src.kind != JV_STR) {
        set_err(err, ERR_NOTFOUND, "tokenizer_config.json has no default chat_template");
        goto out;
    }
    t = chat_template_create(src.u.s.s, src.u.s.n, err);
    if (t)
        take_special_tokens(t, cfg);
out:
    ja_deinit(&a);
    return t;
}

struct chat_template *chat_template_from_config(const char *json, size_t len,
                                                struct jinja_error *err)
{
    return from_config(json, len, NULL, 0, err);
}

struct chat_template *chat_template_load(const char *path, struct jinja_error *err)
{
    size_t len;
    char *src = file_read(path, &len);
    if (!src) {
        set_err(err, ERR_IO, "cannot read %s", path);
        return NULL;
    }
    size_t pl = strlen(path);
    struct chat_template *t = pl >= 5 && !strcmp(path + pl - 5, ".json")
                                  ? chat_template_from_config(src, len, err)
                                  : chat_template_create(src, len, err);
    free(src);
    return t;
}

struct chat_template *chat_template_load_dir(const char *dir, struct jinja_error *err)
{
    char path[4096];
    size_t cfg_len = 0, tpl_len = 0;
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    char *cfg = file_read(path, &cfg_len);
    snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
    char *tpl = file_read(path, &tpl_len);
    struct chat_template *t = NULL;
    if (cfg)
        t = from_config(cfg, cfg_len, tpl, tpl_len, err);
    else if (tpl)
        t = chat_template_create(tpl, tpl_len, err);
    else
        set_err(err, ERR_NOTFOUND, "%s has neither chat_template.jinja nor tokenizer_config.json",
                dir);
    free(cfg);
    free(tpl);
    return t;
}

// ---- request normalisation (what vLLM's chat_utils does before rendering) ----

static struct jinja_value *get(struct jinja_value obj, const char *key)
{
    return obj.kind == JV_DICT ? jv_dict_get(obj.u.dict, key, strlen(key)) : NULL;
}

static void put(struct jarena *a, struct jinja_value obj, const char *key, struct jinja_value v)
{
    jv_dict_set(a, obj.u.dict, jv_str(key, strlen(key)), v);
}

/* The text parts of a content value: NULL/missing -> none, a string -> one, a list -> each string
 * or {"type": "text"|"input_text"|"output_text", "text": ...}, {"type": "refusal", "refusal": ...}
 * or {"type": "thinking", "thinking": ...} part (null ones are skipped), as vLLM reads them.
 * Anything else (images, audio...) is refused: the model is text-only. */
static int content_texts(struct jarena *a, struct jinja_value *content, size_t idx,
                         struct jinja_value *texts, struct jinja_error *err)
{
    *texts = jv_list_new(a, 4);
    if (!content || content->kind == JV_NONE)
        return 0;
    if (content->kind == JV_STR) {
        jv_list_push(a, texts->u.list, *content);
        return 0;
    }
    if (content->kind != JV_LIST)
        return set_err(err, ERR_INVAL, "messages[%zu].content must be a string or an array", idx);
    for (size_t i = 0; i < content->u.list->n; i++) {
        struct jinja_value part = content->u.list->v[i];
        if (part.kind == JV_STR) {
            jv_list_push(a, texts->u.list, part);
            continue;
        }
        struct jinja_value *type = get(part, "type");
        if (!type || type->kind != JV_STR)
            return set_err(err, ERR_INVAL, "messages[%zu].content[%zu] has no type", idx, i);
        const char *field = jv_is_str(*type, "text") || jv_is_str(*type, "input_text") ||
                                    jv_is_str(*type, "output_text")
                                ? "text"
                            : jv_is_str(*type, "refusal")  ? "refusal"
                            : jv_is_str(*type, "thinking") ? "thinking"
                                                           : NULL;
        if (!field)
            return set_err(err, ERR_UNSUPPORTED,
                           "messages[%zu].content[%zu]: content type '%.*s' is not supported "
                           "(text-only model)",
                           idx, i, (int)type->u.s.n, type->u.s.s);
        struct jinja_value *text = get(part, field);
        if (!text || text->kind == JV_NONE)
            continue;
        if (text->kind != JV_STR)
            return set_err(err, ERR_INVAL, "messages[%zu].content[%zu].text must be a string", idx,
                           i);
        jv_list_push(a, texts->u.list, *text);
    }
    return 0;
}

static struct jinja_value join_texts(struct jarena *a, struct jinja_value texts)
{
    struct buf b = {0};
    for (size_t i = 0; i < texts.u.list->n; i++) {
        if (i)
            buf_putc(&b, '\n');
        buf_append(&b, texts.u.list->v[i].u.s.s, texts.u.list->v[i].u.s.n);
    }
    struct jinja_value r = jv_strdup(a, b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return r;
}

/* tool_calls[].function.arguments: a JSON string is parsed; invalid JSON or a value that is not
 * an object or array becomes {} (vLLM's _postprocess_messages). */
static void norm_tool_calls(struct jarena *a, struct jinja_value calls)
{
    for (size_t i = 0; i < calls.u.list->n; i++) {
        struct jinja_value *fn = get(calls.u.list->v[i], "function");
        if (!fn || fn->kind != JV_DICT)
            continue;
        struct jinja_value *args = get(*fn, "arguments");
        struct jinja_value parsed = {0};
        char msg[8];
        if (args && args->kind == JV_STR &&
            jv_json_parse(a, args->u.s.s, args->u.s.n, &parsed, msg, sizeof(msg)) == 0)
            *args = parsed;
        if (!args || (args->kind != JV_DICT && args->kind != JV_LIST))
            put(a, *fn, "arguments", jv_dict_new(a, 0));
    }
}

/* One request message -> the message the template sees (vLLM's ConversationMessage). */
static int norm_message(struct jarena *a, const struct chat_template *t, struct jinja_value m,
                        size_t idx, struct jinja_value *out, struct jinja_error *err)
{
    if (m.kind != JV_DICT)
        return set_err(err, ERR_INVAL, "messages[%zu] must be an object", idx);
    struct jinja_value *role = get(m, "role");
    if (!role || role->kind != JV_STR)
        return set_err(err, ERR_INVAL, "messages[%zu].role must be a string", idx);
    struct jinja_value texts;
    int rc = content_texts(a, get(m, "content"), idx, &texts, err);
    if (rc < 0)
        return rc;
    bool is_tool = jv_is_str(*role, "tool"), is_asst = jv_is_str(*role, "assistant");
    *out = jv_dict_new(a, 8);
    put(a, *out, "role", *role);
    if (t->content_as_parts && !is_tool) { /* "openai" content format */
        struct jinja_value parts = jv_list_new(a, texts.u.list->n);
        for (size_t i = 0; i < texts.u.list->n; i++) {
            struct jinja_value p = jv_dict_new(a, 2);
            put(a, p, "type", jv_str("text", 4));
            put(a, p, "text", texts.u.list->v[i]);
            jv_list_push(a, parts.u.list, p);
        }
        put(a, *out, "content", parts);
    } else { /* "string" format; tool results are always joined */
        put(a, *out, "content", join_texts(a, texts));
    }
    if (is_asst) {
        struct jinja_value *calls = get(m, "tool_calls");
        if (calls && calls->kind == JV_LIST && calls->u.list->n > 0) {
            norm_tool_calls(a, *calls);
            put(a, *out, "tool_calls", *calls);
        } else if (calls && calls->kind != JV_NONE && calls->kind != JV_LIST) {
            return set_err(err, ERR_INVAL, "messages[%zu].tool_calls must be an array", idx);
        }
        struct jinja_value *r = get(m, "reasoning");
        if (!r || r->kind == JV_NONE)
            r = get(m, "reasoning_content");
        if (r && r->kind != JV_NONE) {
            put(a, *out, "reasoning", *r);
            put(a, *out, "reasoning_content", *r);
        }
    } else if (is_tool) {
        struct jinja_value *id = get(m, "tool_call_id");
        if (id)
            put(a, *out, "tool_call_id", *id);
    }
    struct jinja_value *name = get(m, "name");
    if (name && name->kind == JV_STR)
        put(a, *out, "name", *name);
    if (jv_is_str(*role, "developer")) {
        struct jinja_value *tools = get(m, "tools");
        put(a, *out, "tools", tools ? *tools : jv_none());
    }
    return 0;
}

static int normalise_messages(struct jarena *a, const struct chat_template *t,
                              struct jinja_value msgs, struct jinja_value *out,
                              struct jinja_error *err)
{
    if (msgs.kind != JV_LIST)
        return set_err(err, ERR_INVAL, "messages must be an array");
    *out = jv_list_new(a, msgs.u.list->n);
    for (size_t i = 0; i < msgs.u.list->n; i++) {
        struct jinja_value m;
        int rc = norm_message(a, t, msgs.u.list->v[i], i, &m, err);
        if (rc < 0)
            return rc;
        jv_list_push(a, out->u.list, m);
    }
    return 0;
}

/* tools as vLLM hands them over (pydantic model_dump of ChatCompletionToolsParam):
 * {"type", "function": {"name", "description" (null when absent), "parameters" (null when absent),
 * other function keys}, other tool keys}. */
static int normalise_tools(struct jarena *a, struct jinja_value tools, struct jinja_value *out,
                           struct jinja_error *err)
{
    if (tools.kind == JV_NONE) {
        *out = tools;
        return 0;
    }
    if (tools.kind != JV_LIST)
        return set_err(err, ERR_INVAL, "tools must be an array");
    *out = jv_list_new(a, tools.u.list->n);
    for (size_t i = 0; i < tools.u.list->n; i++) {
        struct jinja_value tool = tools.u.list->v[i];
        struct jinja_value *type = get(tool, "type");
        struct jinja_value *fn = get(tool, "function");
        struct jinja_value *name = fn ? get(*fn, "name") : NULL;
        if (tool.kind != JV_DICT || (type && !jv_is_str(*type, "function")) || !fn ||
            fn->kind != JV_DICT || !name || name->kind != JV_STR)
            return set_err(err, ERR_INVAL,
                           "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": "
                           "...}}",
                           i);
        static const char *const fn_keys[] = {"name", "description", "parameters"};
        struct jinja_value nf = jv_dict_new(a, fn->u.dict->n + 3);
        for (size_t k = 0; k < ARRAY_LEN(fn_keys); k++) {
            struct jinja_value *v = get(*fn, fn_keys[k]);
            put(a, nf, fn_keys[k], v ? *v : jv_none());
        }
        for (size_t k = 0; k < fn->u.dict->n; k++)
            if (!jv_dict_find(nf.u.dict, fn->u.dict->k[k]))
                jv_dict_set(a, nf.u.dict, fn->u.dict->k[k], fn->u.dict->v[k]);
        struct jinja_value nt = jv_dict_new(a, tool.u.dict->n + 2);
        put(a, nt, "type", jv_str("function", 8));
        put(a, nt, "function", nf);
        for (size_t k = 0; k < tool.u.dict->n; k++)
            if (!jv_dict_find(nt.u.dict, tool.u.dict->k[k]))
                jv_dict_set(a, nt.u.dict, tool.u.dict->k[k], tool.u.dict->v[k]);
        jv_list_push(a, out->u.list, nt);
    }
    return 0;
}

static bool reserved_kwarg(struct jinja_value k)
{
    return jv_is_str(k, "messages") || jv_is_str(k, "tools") || jv_is_str(k, "documents") ||
           jv_is_str(k, "add_generation_prompt");
}

/* Bind the keys of a kwargs object (null: nothing); anything but an object or null is refused. */
static int bind_kwargs(struct jinja_ctx *c, struct jinja_value kw, const char *what,
                       struct jinja_error *err)
{
    if (kw.kind == JV_NONE)
        return 0;
    if (kw.kind != JV_DICT)
        return set_err(err, ERR_INVAL, "%s must be a JSON object", what);
    struct jarena *a = jinja_ctx_arena(c);
    for (size_t i = 0; i < kw.u.dict->n; i++) {
        struct jinja_value k = kw.u.dict->k[i];
        if (k.kind != JV_STR || reserved_kwarg(k))
            continue;
        jinja_ctx_bind(c, ja_strndup(a, k.u.s.s, k.u.s.n), kw.u.dict->v[i]);
    }
    return 0;
}

static int render_value(const struct chat_template *t, struct jinja_ctx *c, struct jinja_value req,
                        struct jinja_value defaults, char **out, size_t *out_len,
                        struct jinja_error *err)
{
    struct jarena *a = jinja_ctx_arena(c);
    if (req.kind != JV_DICT)
        return set_err(err, ERR_INVAL, "request must be a JSON object");
    struct jinja_value *msgs = jv_dict_get(req.u.dict, "messages", 8);
    if (!msgs)
        return set_err(err, ERR_INVAL, "request has no messages");
    struct jinja_value *tools = jv_dict_get(req.u.dict, "tools", 5);
    struct jinja_value *agp = jv_dict_get(req.u.dict, "add_generation_prompt", 21);
    struct jinja_value *kw = jv_dict_get(req.u.dict, "chat_template_kwargs", 20);
    struct jinja_value conv, tl;
    int rc = normalise_messages(a, t, *msgs, &conv, err);
    if (rc < 0)
        return rc;
    if ((rc = normalise_tools(a, tools ? *tools : jv_none(), &tl, err)) < 0)
        return rc;
    jinja_ctx_bind(c, "messages", conv);
    jinja_ctx_bind(c, "tools", tl);
    jinja_ctx_bind(c, "documents", jv_none());
    jinja_ctx_bind(c, "add_generation_prompt", agp ? *agp : jv_bool(true));
    for (size_t i = 0; i < t->special.u.dict->n; i++)
        jinja_ctx_bind(c, t->special.u.dict->k[i].u.s.s, t->special.u.dict->v[i]);
    if ((rc = bind_kwargs(c, defaults, "default chat_template_kwargs", err)) < 0)
        return rc;
    if (kw && (rc = bind_kwargs(c, *kw, "chat_template_kwargs", err)) < 0)
        return rc;
    return jinja_template_render(t->tpl, c, out, out_len, err);
}

int chat_template_render(const struct chat_template *t, const char *request_json, size_t len,
                         const char *default_kwargs_json, char **out, size_t *out_len,
                         struct jinja_error *err)
{
    struct jinja_ctx *c = jinja_ctx_create();
    struct jinja_value req, defaults = jv_none();
    err->line = 0;
    err->msg[0] = 0;
    *out = NULL;
    *out_len = 0;
    int rc = jv_json_parse(jinja_ctx_arena(c), request_json, len, &req, err->msg, sizeof(err->msg));
    if (rc == 0 && default_kwargs_json)
        rc = jv_json_parse(jinja_ctx_arena(c), default_kwargs_json, strlen(default_kwargs_json),
                           &defaults, err->msg, sizeof(err->msg));
    if (rc == 0)
        rc = render_value(t, c, req, defaults, out, out_len, err);
    jinja_ctx_destroy(c);
    return rc;
}

static struct jinja_value from_cjson(struct jarena *a, const cJSON *j, int depth)
{
    if (depth > 256 || !j || cJSON_IsNull(j) || cJSON_IsInvalid(j))
        return jv_none();
    if (cJSON_IsBool(j))
        return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9.2e18)
            return jv_int((int64_t)d);
        return jv_float(d);
    }
    if (cJSON_IsString(j) && j->valuestring)
        return jv_strdup(a, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        struct jinja_value l = jv_list_new(a, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *e = j->child; e; e = e->next)
            jv_list_push(a, l.u.list, from_cjson(a, e, depth + 1));
        return l;
    }
    if (cJSON_IsObject(j)) {
        struct jinja_value d = jv_dict_new(a, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *e = j->child; e; e = e->next)
            if (e->string)
                jv_dict_set(a, d.u.dict, jv_strdup(a, e->string, strlen(e->string)),
                            from_cjson(a, e, depth + 1));
        return d;
    }
    return jv_none();
}

int chat_template_render_cjson(const struct chat_template *t, const cJSON *request,
                               const cJSON *default_kwargs, char **out, size_t *out_len,
                               struct jinja_error *err)
{
    struct jinja_ctx *c = jinja_ctx_create();
    err->line = 0;
    err->msg[0] = 0;
    *out = NULL;
    *out_len = 0;
    struct jinja_value req = from_cjson(jinja_ctx_arena(c), request, 0);
    struct jinja_value defaults =
        default_kwargs ? from_cjson(jinja_ctx_arena(c), default_kwargs, 0) : jv_none();
    int rc = render_value(t, c, req, defaults, out, out_len, err);
    jinja_ctx_destroy(c);
    return rc;
}
