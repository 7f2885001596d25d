/* grammar_compile: JSON Schema (the subset in text/grammar.h) -> the node graph of
 * grammar_internal.h. Everything not understood is refused by name, never ignored: a schema the
 * automaton cannot enforce must not be accepted. Properties are produced in schema order; with
 * properties listed, only those are produced (a conforming subset even when
 * additionalProperties allows more). */
#include "grammar_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

struct cc {
    struct grammar *g;
    int depth; // schema nesting of the node being compiled
    char *err;
    size_t errlen;
    char path[256]; // JSON pointer of the schema being compiled
};

int grammar_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *at(const struct cc *c)
{
    return c->path[0] ? c->path : "/";
}

static int node_new(struct grammar *g, enum gnode_kind kind)
{
    if (g->n_nodes == g->cap_nodes) {
        g->cap_nodes = g->cap_nodes ? 2 * g->cap_nodes : 16;
        g->nodes = xrealloc(g->nodes, sizeof(*g->nodes) * (size_t)g->cap_nodes);
    }
    struct gnode *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->extra = -1;
    n->items = -1;
    n->max_items = UINT32_MAX;
    for (int b = 0; b < 256; b++)
        n->alt_of_byte[b] = -1;
    return g->n_nodes++;
}

static void lit_add(struct grammar *g, int id, const char *text)
{
    struct gnode *n = &g->nodes[id];
    n->lits = xrealloc(n->lits, sizeof(char *) * (size_t)(n->n_lits + 1));
    n->lit_lens = xrealloc(n->lit_lens, sizeof(size_t) * (size_t)(n->n_lits + 1));
    n->lits[n->n_lits] = xstrdup(text);
    n->lit_lens[n->n_lits] = strlen(text);
    n->n_lits++;
}

/* bytes a value of node id may start with */
static void first_bytes(const struct grammar *g, int id, bool set[256])
{
    const struct gnode *n = &g->nodes[id];
    memset(set, 0, 256);
    switch (n->kind) {
    case GNODE_OBJECT:
        set['{'] = true;
        break;
    case GNODE_ARRAY:
        set['['] = true;
        break;
    case GNODE_STRING:
        set['"'] = true;
        break;
    case GNODE_NUMBER:
    case GNODE_INTEGER:
        set['-'] = true;
        for (int d = '0'; d <= '9'; d++)
            set[d] = true;
        break;
    case GNODE_LITERAL:
        for (int i = 0; i < n->n_lits; i++)
            set[(uint8_t)n->lits[i][0]] = true;
        break;
    case GNODE_UNION:
        for (int b = 0; b < 256; b++)
            set[b] = n->alt_of_byte[b] >= 0;
        break;
    case GNODE_TEXT:
    case GNODE_SEQ:
    case GNODE_TAGS:
    case GNODE_RAW:
    case GNODE_REPEAT:
        break; // markup is never an alternative of a union
    }
}

/* Add alternative alt to union u; alternatives must not share a first byte. */
static int union_add(struct cc *c, int u, int alt)
{
    struct grammar *g = c->g;
    bool set[256];
    first_bytes(g, alt, set);
    bool is_union = g->nodes[alt].kind == GNODE_UNION;
    for (int b = 0; b < 256; b++) {
        if (!set[b])
            continue;
        int16_t to = (int16_t)(is_union ? g->nodes[alt].alt_of_byte[b] : alt);
        if (g->nodes[u].alt_of_byte[b] >= 0 && g->nodes[u].alt_of_byte[b] != to)
            return grammar_fail(c->err, c->errlen,
                                "unsupported anyOf/type list at %s: alternatives overlap (both may "
                                "start with '%c')",
                                at(c), b >= 0x20 && b < 0x7f ? b : '?');
        g->nodes[u].alt_of_byte[b] = to;
        g->nodes[u].alt_bytes[b >> 6] |= (uint64_t)1 << (b & 63);
    }
    return 0;
}

static int any_node(struct cc *c)
{
    struct grammar *g = c->g;
    if (g->any_node >= 0)
        return g->any_node;
    int u = node_new(g, GNODE_UNION);
    g->any_node = u;
    int obj = node_new(g, GNODE_OBJECT);
    g->nodes[obj].extra = u;
    int arr = node_new(g, GNODE_ARRAY);
    g->nodes[arr].items = u;
    int lit = node_new(g, GNODE_LITERAL);
    lit_add(g, lit, "true");
    lit_add(g, lit, "false");
    lit_add(g, lit, "null");
    int alts[] = {obj, arr, g->string_node, node_new(g, GNODE_NUMBER), lit};
    for (size_t i = 0; i < sizeof(alts) / sizeof(alts[0]); i++)
        if (union_add(c, u, alts[i]) < 0)
            return -1;
    return u;
}

static int compile_node(struct cc *c, const cJSON *s);

/* compile child schema s reached by path suffix "/key" (or "/key/index" when idx >= 0) */
static int compile_at(struct cc *c, const cJSON *s, const char *key, int idx)
{
    size_t len = strlen(c->path);
    if (idx >= 0)
        snprintf(c->path + len, sizeof(c->path) - len, "/%s/%d", key, idx);
    else
        snprintf(c->path + len, sizeof(c->path) - len, "/%s", key);
    c->depth++;
    int id = compile_node(c, s);
    c->depth--;
    c->path[len] = '\0';
    return id;
}

static int literal_node(struct cc *c, const cJSON *vals, const char *kw)
{
    int id = node_new(c->g, GNODE_LITERAL);
    const cJSON *v;
    cJSON_ArrayForEach(v, vals)
    {
        if (!cJSON_IsString(v) && !cJSON_IsNumber(v) && !cJSON_IsBool(v) && !cJSON_IsNull(v))
            return grammar_fail(
                c->err, c->errlen,
                "unsupported %s value at %s: only strings, numbers, booleans and null", kw, at(c));
        if (cJSON_IsNumber(v) && !isfinite(v->valuedouble))
            return grammar_fail(c->err, c->errlen,
                                "unsupported %s value at %s: a number out of range", kw, at(c));
        if (c->g->nodes[id].n_lits == GRAMMAR_PROPS_MAX)
            return grammar_fail(c->err, c->errlen, "unsupported %s at %s: more than %d values", kw,
                                at(c), GRAMMAR_PROPS_MAX);
        char *text = cJSON_PrintUnformatted(v);
        if (!text)
            return grammar_fail(c->err, c->errlen, "out of memory");
        lit_add(c->g, id, text);
        cJSON_free(text);
    }
    if (c->g->nodes[id].n_lits == 0)
        return grammar_fail(c->err, c->errlen, "invalid %s at %s: no values", kw, at(c));
    return id;
}

static int object_node(struct cc *c, const cJSON *s)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props))
        return grammar_fail(c->err, c->errlen, "invalid properties at %s: not an object", at(c));
    if (req && !cJSON_IsArray(req))
        return grammar_fail(c->err, c->errlen, "invalid required at %s: not an array", at(c));
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return grammar_fail(c->err, c->errlen,
                            "invalid additionalProperties at %s: not a boolean or a schema", at(c));
    int n = props ? cJSON_GetArraySize(props) : 0;
    if (n > GRAMMAR_PROPS_MAX)
        return grammar_fail(c->err, c->errlen, "unsupported properties at %s: more than %d", at(c),
                            GRAMMAR_PROPS_MAX);
    int id = node_new(c->g, GNODE_OBJECT);
    if (n == 0) {
        int extra = -1;
        if (!addl || cJSON_IsTrue(addl))
            extra = any_node(c);
        else if (cJSON_IsObject(addl))
            extra = compile_at(c, addl, "additionalProperties", -1);
        if ((!addl || !cJSON_IsFalse(addl)) && extra < 0)
            return -1;
        c->g->nodes[id].extra = extra;
    }
    if (n) {
        struct gnode *o = &c->g->nodes[id];
        o->n_props = n;
        o->keys = xcalloc((size_t)n, sizeof(char *));
        o->key_lens = xcalloc((size_t)n, sizeof(size_t));
        o->prop_nodes = xcalloc((size_t)n, sizeof(int));
    }
    int i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        cJSON *name = cJSON_CreateString(p->string);
        char *enc = name ? cJSON_PrintUnformatted(name) : NULL;
        cJSON_Delete(name);
        if (!enc)
            return grammar_fail(c->err, c->errlen, "out of memory");
        size_t len = strlen(enc);
        char *key = xmalloc(len - 1);
        memcpy(key, enc + 1, len - 2); // without the quotes
        key[len - 2] = '\0';
        cJSON_free(enc);
        c->g->nodes[id].keys[i] = key;
        c->g->nodes[id].key_lens[i] = len - 2;
        char seg[200];
        snprintf(seg, sizeof(seg), "properties/%s", p->string);
        int v = compile_at(c, p, seg, -1);
        if (v < 0)
            return -1;
        c->g->nodes[id].prop_nodes[i++] = v;
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, req)
    {
        if (!cJSON_IsString(r))
            return grammar_fail(c->err, c->errlen, "invalid required at %s: not a list of names",
                                at(c));
        int k = 0;
        const cJSON *q = props ? props->child : NULL;
        while (q && strcmp(q->string, r->valuestring) != 0) {
            q = q->next;
            k++;
        }
        if (!q)
            return grammar_fail(c->err, c->errlen,
                                "unsupported required at %s: '%s' is not in properties", at(c),
                                r->valuestring);
        c->g->nodes[id].required |= (uint64_t)1 << k;
    }
    return id;
}

static int count_kw(struct cc *c, const cJSON *s, const char *kw, uint32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e9 ||
        v->valuedouble != (double)(uint32_t)v->valuedouble)
        return grammar_fail(c->err, c->errlen, "invalid %s at %s: not a non-negative integer", kw,
                            at(c));
    *out = (uint32_t)v->valuedouble;
    return 0;
}

static int array_node(struct cc *c, const cJSON *s)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (items && cJSON_IsArray(items))
        return grammar_fail(c->err, c->errlen, "unsupported keyword 'items' (array form) at %s",
                            at(c));
    uint32_t lo = 0, hi = UINT32_MAX;
    if (count_kw(c, s, "minItems", &lo) < 0 || count_kw(c, s, "maxItems", &hi) < 0)
        return -1;
    if (lo > hi)
        return grammar_fail(c->err, c->errlen, "invalid minItems at %s: above maxItems", at(c));
    int it = items && !cJSON_IsTrue(items) ? compile_at(c, items, "items", -1) : any_node(c);
    if (it < 0)
        return -1;
    int id = node_new(c->g, GNODE_ARRAY);
    c->g->nodes[id].items = it;
    c->g->nodes[id].min_items = lo;
    c->g->nodes[id].max_items = hi;
    return id;
}

static int type_node(struct cc *c, const cJSON *s, const char *type)
{
    if (!strcmp(type, "object"))
        return object_node(c, s);
    if (!strcmp(type, "array"))
        return array_node(c, s);
    if (!strcmp(type, "string"))
        return c->g->string_node;
    if (!strcmp(type, "number"))
        return node_new(c->g, GNODE_NUMBER);
    if (!strcmp(type, "integer"))
        return node_new(c->g, GNODE_INTEGER);
    if (!strcmp(type, "boolean") || !strcmp(type, "null")) {
        int id = node_new(c->g, GNODE_LITERAL);
        lit_add(c->g, id, type[0] == 'b' ? "true" : "null");
        if (type[0] == 'b')
            lit_add(c->g, id, "false");
        return id;
    }
    return grammar_fail(c->err, c->errlen, "unsupported type '%s' at %s", type, at(c));
}

static const char *const known_kw[] = {
    "type",     "properties", "required", "additionalProperties",
    "enum",     "const",      "items",    "minItems",
    "maxItems", "anyOf",      "title",    "description",
    "$schema",  "default",    "examples", "strict",
    NULL,
};

static int compile_node(struct cc *c, const cJSON *s)
{
    /* a value takes a frame per nesting level (and one more for an object key): refusing deep
     * schemas keeps every required value within GRAMMAR_DEPTH_MAX; the node cap keeps node
     * indices in a frame's 16 bits */
    if (c->depth > GRAMMAR_SCHEMA_DEPTH_MAX)
        return grammar_fail(c->err, c->errlen, "unsupported schema at %s: nested deeper than %d",
                            at(c), GRAMMAR_SCHEMA_DEPTH_MAX);
    if (c->g->n_nodes > GRAMMAR_NODES_MAX)
        return grammar_fail(c->err, c->errlen, "unsupported schema at %s: more than %d nodes",
                            at(c), GRAMMAR_NODES_MAX);
    if (cJSON_IsTrue(s))
        return any_node(c);
    if (!cJSON_IsObject(s))
        return grammar_fail(c->err, c->errlen, "invalid schema at %s: not an object", at(c));
    const cJSON *kw;
    cJSON_ArrayForEach(kw, s)
    {
        int k = 0;
        while (known_kw[k] && strcmp(known_kw[k], kw->string) != 0)
            k++;
        if (!known_kw[k])
            return grammar_fail(c->err, c->errlen, "unsupported keyword '%s' at %s", kw->string,
                                at(c));
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (cst) {
        cJSON *one = cJSON_CreateArray();
        cJSON_AddItemReferenceToArray(one, (cJSON *)cst);
        int id = literal_node(c, one, "const");
        cJSON_Delete(one);
        return id;
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en) {
        if (!cJSON_IsArray(en))
            return grammar_fail(c->err, c->errlen, "invalid enum at %s: not an array", at(c));
        return literal_node(c, en, "enum");
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (any) {
        if (!cJSON_IsArray(any) || cJSON_GetArraySize(any) == 0)
            return grammar_fail(c->err, c->errlen, "invalid anyOf at %s: not a non-empty array",
                                at(c));
        if (cJSON_GetObjectItemCaseSensitive(s, "type"))
            return grammar_fail(c->err, c->errlen, "unsupported keyword 'type' beside anyOf at %s",
                                at(c));
        int u = node_new(c->g, GNODE_UNION);
        int i = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, any)
        {
            int alt = compile_at(c, a, "anyOf", i++);
            if (alt < 0 || union_add(c, u, alt) < 0)
                return -1;
        }
        return u;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!type) {
        if (cJSON_GetObjectItemCaseSensitive(s, "properties") ||
            cJSON_GetObjectItemCaseSensitive(s, "required") ||
            cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))
            return object_node(c, s);
        if (cJSON_GetObjectItemCaseSensitive(s, "items") ||
            cJSON_GetObjectItemCaseSensitive(s, "minItems") ||
            cJSON_GetObjectItemCaseSensitive(s, "maxItems"))
            return array_node(c, s);
        return any_node(c);
    }
    if (cJSON_IsString(type))
        return type_node(c, s, type->valuestring);
    if (!cJSON_IsArray(type) || cJSON_GetArraySize(type) == 0)
        return grammar_fail(c->err, c->errlen, "invalid type at %s: not a name or a non-empty list",
                            at(c));
    bool has_number = false;
    const cJSON *t;
    cJSON_ArrayForEach(t, type)
    {
        if (!cJSON_IsString(t))
            return grammar_fail(c->err, c->errlen, "invalid type at %s: not a list of names",
                                at(c));
        has_number |= !strcmp(t->valuestring, "number");
    }
    int u = node_new(c->g, GNODE_UNION);
    cJSON_ArrayForEach(t, type)
    {
        if (has_number && !strcmp(t->valuestring, "integer"))
            continue; // number includes the integers
        if (c->g->n_nodes > GRAMMAR_NODES_MAX)
            return grammar_fail(c->err, c->errlen, "unsupported type at %s: too long a list",
                                at(c));
        int alt = type_node(c, s, t->valuestring);
        if (alt < 0 || union_add(c, u, alt) < 0)
            return -1;
    }
    return u;
}

struct grammar *grammar_compile(const char *json, size_t len, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    cJSON *doc = cJSON_ParseWithLength(json, len);
    struct cc c = {.err = err, .errlen = errlen};
    if (!doc) {
        grammar_fail(c.err, c.errlen, "invalid schema: not JSON");
        return NULL;
    }
    struct grammar *g = xcalloc(1, sizeof(*g));
    g->any_node = -1;
    c.g = g;
    g->string_node = node_new(g, GNODE_STRING);
    g->root = compile_node(&c, doc);
    cJSON_Delete(doc);
    if (g->root < 0) {
        grammar_destroy(g);
        return NULL;
    }
    return g;
}

int grammar_compile_into(struct grammar *g, const struct cJSON *s, char *err, size_t errlen)
{
    struct cc c = {.g = g, .err = err, .errlen = errlen};
    if (err && errlen)
        err[0] = '\0';
    return compile_node(&c, s);
}

int grammar_node_new(struct grammar *g, enum gnode_kind kind)
{
    return node_new(g, kind);
}

void grammar_node_lit_add(struct grammar *g, int id, const char *text)
{
    lit_add(g, id, text);
}

void grammar_destroy(struct grammar *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++) {
        struct gnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_props; k++)
            free(n->keys[k]);
        for (int k = 0; k < n->n_lits; k++)
            free(n->lits[k]);
        free(n->keys);
        free(n->key_lens);
        free(n->prop_nodes);
        free(n->lits);
        free(n->lit_lens);
        free(n->seq);
    }
    free(g->nodes);
    free(g);
}
