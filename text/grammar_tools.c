/* grammar_tools: forced tool calls -> the markup nodes of grammar_internal.h (see
 * text/grammar_tools.h for the language). The graph, for each call:
 *   REPEAT( TAGS once { "<tool_call>\n<function=NAME>\n" -> PARAMS(NAME) } )
 *   PARAMS = TAGS { "<parameter=KEY>\n" -> value } then "</function>\n</tool_call>"
 *   value  = SEQ( RAW up to "</parameter>", "\n" )                 plain-text parameters
 *          | TAGS once { "V\n</parameter>\n" }                      a plain-text enum
 *          | SEQ( JSON value of the property schema, "\n</parameter>\n" )   typed parameters
 * Which parameters are plain text follows text/toolcall.c's typing, so that what the grammar lets
 * through is what the parser turns into the arguments. */
#include "text/grammar_tools.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "grammar_internal.h"

#define SPEC_KEY "tern_tool_calls"
#define TYPES_MAX 8

struct tc {
    struct grammar *g;
    char *err;
    size_t errlen;
    int str_value; // SEQ(RAW, "\n")
    int json_end;  // "\n</parameter>\n"
};

char *grammar_tools_spec(const char *tools_json, const char *name, bool parallel)
{
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    if (!cJSON_IsArray(tools)) {
        cJSON_Delete(tools);
        return NULL;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *in = cJSON_AddObjectToObject(root, SPEC_KEY);
    cJSON_AddItemToObject(in, "tools", tools);
    if (name)
        cJSON_AddStringToObject(in, "name", name);
    cJSON_AddBoolToObject(in, "parallel", parallel);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    char *out = text ? xstrdup(text) : NULL;
    cJSON_free(text);
    return out;
}

bool grammar_tools_is_spec(const char *text, size_t len)
{
    static const char head[] = "{\"" SPEC_KEY "\"";
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
        i++;
    return len - i >= sizeof(head) - 1 && memcmp(text + i, head, sizeof(head) - 1) == 0;
}

// ---- nodes ----

static int text_node(struct grammar *g, const char *text)
{
    int id = grammar_node_new(g, GNODE_TEXT);
    grammar_node_lit_add(g, id, text);
    return id;
}

static int seq_node(struct grammar *g, int a, int b)
{
    int id = grammar_node_new(g, GNODE_SEQ);
    struct gnode *n = &g->nodes[id];
    n->seq = xmalloc(2 * sizeof(int));
    n->seq[0] = a;
    n->seq[1] = b;
    n->n_seq = 2;
    return id;
}

/* a TAGS node over keys (n, copied) leading to nodes[] (-1: the key ends the value) */
static int tags_node(struct grammar *g, char **keys, const int *nodes, int n, bool once)
{
    int id = grammar_node_new(g, GNODE_TAGS);
    struct gnode *t = &g->nodes[id];
    t->tags_once = once;
    t->n_props = n;
    t->keys = xcalloc((size_t)(n ? n : 1), sizeof(char *));
    t->key_lens = xcalloc((size_t)(n ? n : 1), sizeof(size_t));
    t->prop_nodes = xcalloc((size_t)(n ? n : 1), sizeof(int));
    for (int i = 0; i < n; i++) {
        t->keys[i] = xstrdup(keys[i]);
        t->key_lens[i] = strlen(keys[i]);
        t->prop_nodes[i] = nodes[i];
    }
    return id;
}

/* a name the markup can carry: the parser reads it up to '>' */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > GRAMMAR_TOOLS_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == '<' || s[i] == '>')
            return false;
    return true;
}

static char *strf(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = xmalloc(la + lb + lc + 1);
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
    return s;
}

// ---- parameter values ----

/* the schema's type names as text/toolcall.c collects them: "type" (a name or a list) and the
 * alternatives of anyOf / oneOf */
static void collect_types(const cJSON *schema, const char **types, int *n)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const cJSON *e;
    if (cJSON_IsString(t) && *n < TYPES_MAX)
        types[(*n)++] = t->valuestring;
    if (cJSON_IsArray(t)) {
        cJSON_ArrayForEach(e, t)
        {
            if (cJSON_IsString(e) && *n < TYPES_MAX)
                types[(*n)++] = e->valuestring;
        }
    }
    static const char *const combos[] = {"anyOf", "oneOf"};
    for (size_t k = 0; k < 2; k++)
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(schema, combos[k]))
            collect_types(e, types, n);
}

/* plain text that can stand as an enum key: no '<' (no tag inside) and no control bytes */
static bool enum_text_ok(const cJSON *v)
{
    if (!cJSON_IsString(v))
        return false;
    for (const char *p = v->valuestring; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '<')
            return false;
    return true;
}

/* a string enum / const whose values are all plain text: one of them; else -1 */
static int string_enum(struct tc *c, const cJSON *prop)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(prop, "enum");
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(prop, "const");
    int n = cst ? 1 : cJSON_GetArraySize(en);
    if ((!cst && !cJSON_IsArray(en)) || n == 0 || n > GRAMMAR_PROPS_MAX)
        return -1;
    char *keys[GRAMMAR_PROPS_MAX];
    int nodes[GRAMMAR_PROPS_MAX];
    const cJSON *v = cst ? cst : en->child;
    for (int i = 0; i < n; i++, v = v->next)
        if (!enum_text_ok(v))
            return -1;
    v = cst ? cst : en->child;
    for (int i = 0; i < n; i++, v = v->next) {
        keys[i] = strf(v->valuestring, "\n</parameter>\n", "");
        nodes[i] = -1;
    }
    int id = tags_node(c->g, keys, nodes, n, true);
    for (int i = 0; i < n; i++)
        free(keys[i]);
    return id;
}

/* a JSON value under prop; under its types alone when prop is outside grammar_compile's subset;
 * else any JSON value */
static int json_value(struct tc *c, const cJSON *prop, const char *const *types, int n_types)
{
    int id = grammar_compile_into(c->g, prop, NULL, 0);
    if (id < 0) {
        cJSON *s = cJSON_CreateObject();
        cJSON *ts = cJSON_AddArrayToObject(s, "type");
        for (int i = 0; i < n_types; i++)
            cJSON_AddItemToArray(ts, cJSON_CreateString(types[i]));
        id = grammar_compile_into(c->g, s, NULL, 0);
        cJSON_Delete(s);
    }
    if (id < 0) {
        cJSON *any = cJSON_CreateTrue();
        id = grammar_compile_into(c->g, any, NULL, 0);
        cJSON_Delete(any);
    }
    if (id < 0)
        return grammar_fail(c->err, c->errlen,
                            "tools: too large to enforce (more than %d grammar nodes)",
                            GRAMMAR_NODES_MAX);
    return seq_node(c->g, id, c->json_end);
}

static int value_node(struct tc *c, const cJSON *prop)
{
    const char *types[TYPES_MAX];
    int n = 0;
    if (cJSON_IsObject(prop))
        collect_types(prop, types, &n);
    bool text = n == 0;
    for (int i = 0; i < n; i++)
        text |= strcmp(types[i], "string") == 0;
    if (!text)
        return json_value(c, prop, types, n);
    int e = string_enum(c, prop);
    return e >= 0 ? e : c->str_value;
}

// ---- functions ----

static const cJSON *tool_function(const cJSON *t)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
    return cJSON_IsObject(f) ? f : t;
}

static int params_node(struct tc *c, const cJSON *fn, const char *name)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    int n = cJSON_IsObject(props) ? cJSON_GetArraySize(props) : 0;
    if (n > GRAMMAR_PROPS_MAX)
        return grammar_fail(c->err, c->errlen,
                            "tools: function '%.64s' has more than %d parameters", name,
                            GRAMMAR_PROPS_MAX);
    char *keys[GRAMMAR_PROPS_MAX];
    int nodes[GRAMMAR_PROPS_MAX];
    uint64_t required = 0;
    int i = 0, rc = 0;
    const cJSON *p;
    for (p = n ? props->child : NULL; p && rc == 0; p = p->next, i++) {
        keys[i] = NULL;
        if (!name_ok(p->string)) {
            rc = grammar_fail(c->err, c->errlen,
                              "tools: parameter name '%.64s' of '%.64s' cannot be written as a tag",
                              p->string, name);
            break;
        }
        const cJSON *r;
        cJSON_ArrayForEach(r, req)
        {
            if (cJSON_IsString(r) && !strcmp(r->valuestring, p->string))
                required |= (uint64_t)1 << i;
        }
        keys[i] = strf("<parameter=", p->string, ">\n");
        nodes[i] = value_node(c, p);
        if (nodes[i] < 0)
            rc = -1;
    }
    int id = -1;
    if (rc == 0) {
        id = tags_node(c->g, keys, nodes, n, false);
        c->g->nodes[id].required = required;
        grammar_node_lit_add(c->g, id, "</function>\n</tool_call>");
    }
    for (int k = 0; k < i && k < n; k++)
        free(keys[k]);
    return id;
}

static int funcs_node(struct tc *c, const cJSON *tools, const char *only)
{
    int n = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(tool_function(t), "name");
        if (!cJSON_IsString(nm))
            return grammar_fail(c->err, c->errlen, "tools: a tool has no function name");
        if (!only || !strcmp(only, nm->valuestring))
            n++;
    }
    if (n == 0)
        return grammar_fail(c->err, c->errlen, "tool_choice names unknown function '%.64s'",
                            only ? only : "");
    if (n > GRAMMAR_TOOLS_MAX)
        return grammar_fail(c->err, c->errlen,
                            "tools: more than %d tools cannot be forced (tool_choice \"required\")",
                            GRAMMAR_TOOLS_MAX);
    char *keys[GRAMMAR_TOOLS_MAX];
    int nodes[GRAMMAR_TOOLS_MAX];
    int i = 0, rc = 0;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *fn = tool_function(t);
        const char *nm = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        if (only && strcmp(only, nm) != 0)
            continue;
        if (!name_ok(nm)) {
            rc = grammar_fail(c->err, c->errlen,
                              "tools: function name '%.64s' cannot be written as a tag", nm);
            break;
        }
        nodes[i] = params_node(c, fn, nm);
        if (nodes[i] < 0) {
            rc = -1;
            break;
        }
        keys[i++] = strf("<tool_call>\n<function=", nm, ">\n");
    }
    int id = rc == 0 ? tags_node(c->g, keys, nodes, n, true) : -1;
    for (int k = 0; k < i; k++)
        free(keys[k]);
    return id;
}

static int compile_spec(struct tc *c, const cJSON *doc)
{
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(doc, SPEC_KEY);
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(in, "tools");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(in, "name");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(in, "parallel");
    if (!cJSON_IsArray(tools) || (name && !cJSON_IsString(name)) || !cJSON_IsBool(par))
        return grammar_fail(c->err, c->errlen, "invalid tool-call spec");
    struct grammar *g = c->g;
    int raw = grammar_node_new(g, GNODE_RAW);
    grammar_node_lit_add(g, raw, "</parameter>"); // the terminator first; all start with '<'
    grammar_node_lit_add(g, raw, "</function>");
    grammar_node_lit_add(g, raw, "</tool_call>");
    c->str_value = seq_node(g, raw, text_node(g, "\n"));
    c->json_end = text_node(g, "\n</parameter>\n");
    int calls = funcs_node(c, tools, name ? name->valuestring : NULL);
    if (calls < 0)
        return -1;
    if (g->n_nodes > GRAMMAR_NODES_MAX)
        return grammar_fail(c->err, c->errlen,
                            "tools: too large to enforce (more than %d grammar nodes)",
                            GRAMMAR_NODES_MAX);
    int root = grammar_node_new(g, GNODE_REPEAT);
    g->nodes[root].items = calls;
    g->nodes[root].min_items = 1;
    g->nodes[root].max_items = cJSON_IsTrue(par) && !name ? UINT32_MAX : 1; // named: one call
    return root;
}

struct grammar *grammar_tools_compile(const char *spec, size_t len, char *err, size_t errlen)
{
    struct tc c = {.err = err, .errlen = errlen};
    if (err && errlen)
        err[0] = '\0';
    cJSON *doc = cJSON_ParseWithLength(spec, len);
    if (!doc) {
        grammar_fail(c.err, c.errlen, "invalid tool-call spec: not JSON");
        return NULL;
    }
    struct grammar *g = xcalloc(1, sizeof(*g));
    g->any_node = -1;
    g->string_node = grammar_node_new(g, GNODE_STRING);
    c.g = g;
    g->root = compile_spec(&c, doc);
    cJSON_Delete(doc);
    if (g->root < 0) {
        grammar_destroy(g);
        return NULL;
    }
    return g;
}

struct grammar *grammar_compile_any(const char *text, size_t len, char *err, size_t errlen)
{
    if (grammar_tools_is_spec(text, len))
        return grammar_tools_compile(text, len, err, errlen);
    return grammar_compile(text, len, err, errlen);
}
