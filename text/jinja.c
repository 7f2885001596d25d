/* jinja public API: template lifecycle, render contexts (variables + arena), and render. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "jinja_internal.h"

struct jinja_ctx {
    struct jarena arena;     // variables and render temporaries
    struct jinja_value vars; // JV_DICT
};

struct jinja_template *jinja_template_create(const char *src, size_t len, struct jinja_error *err)
{
    struct jinja_template *t = xcalloc(1, sizeof(*t));
    ja_init(&t->arena);
    if (jinja_parse(t, src, len, err) < 0) {
        jinja_template_destroy(t);
        return NULL;
    }
    return t;
}

void jinja_template_destroy(struct jinja_template *t)
{
    if (!t)
        return;
    ja_deinit(&t->arena);
    free(t);
}

static bool names_var(const struct jnode *e, const char *name)
{
    if (!e)
        return false;
    if (e->type == JN_NAME || e->type == JN_GETATTR)
        return !strcmp(e->name, name);
    if (e->type == JN_GETITEM && e->b->type == JN_CONST)
        return jv_is_str(e->b->val, name);
    return false;
}

static bool iterates(const struct jnode *n, const char *name)
{
    if (!n)
        return false;
    if (n->type == JN_FOR && names_var(n->b, name))
        return true;
    const struct jnode *ch[] = {n->a, n->b, n->c, n->d, n->e};
    for (size_t i = 0; i < ARRAY_LEN(ch); i++)
        if (iterates(ch[i], name))
            return true;
    for (size_t i = 0; i < n->n_kids; i++)
        if (iterates(n->kids[i], name))
            return true;
    return false;
}

bool jinja_template_iterates_over(const struct jinja_template *t, const char *name)
{
    return iterates(t->root, name);
}

// ---- vLLM's content-format detection ----

struct names_set {
    const char *v[64];
    size_t n;
    bool bad; /* an assignment shape vLLM would fail on: it then falls back to "string" */
};

static bool in_set(const struct names_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name))
            return true;
    return false;
}

static void add_name(struct names_set *s, const char *name)
{
    if (!in_set(s, name) && s->n < ARRAY_LEN(s->v))
        s->v[s->n++] = name;
}

/* `var`, or `var.key` / `var['key']` when key is given, possibly under filters, tests and
 * slices: vLLM's _is_var_or_elems_access. */
static bool var_or_elems(const struct jnode *e, const char *var, const char *key)
{
    if (!e)
        return false;
    if (e->type == JN_FILTER || e->type == JN_TEST || e->type == JN_SLICE)
        return var_or_elems(e->a, var, key);
    if (!key)
        return e->type == JN_NAME && !strcmp(e->name, var);
    if (e->type == JN_GETATTR)
        return !strcmp(e->name, key) && e->a->type == JN_NAME && !strcmp(e->a->name, var);
    if (e->type == JN_GETITEM)
        return e->b->type == JN_CONST && jv_is_str(e->b->val, key) && e->a->type == JN_NAME &&
               !strcmp(e->a->name, var);
    return false;
}

typedef void walk_fn(const struct jnode *n, struct names_set *from, struct names_set *to);

static void walk(const struct jnode *n, walk_fn *fn, struct names_set *from, struct names_set *to)
{
    if (!n)
        return;
    fn(n, from, to);
    const struct jnode *ch[] = {n->a, n->b, n->c, n->d, n->e};
    for (size_t i = 0; i < ARRAY_LEN(ch); i++)
        walk(ch[i], fn, from, to);
    for (size_t i = 0; i < n->n_kids; i++)
        walk(n->kids[i], fn, from, to);
    for (size_t i = 0; i < n->n_kw; i++)
        walk(n->kw[i], fn, from, to);
}

/* When n->b accesses a name of `from` (its attribute/key `key` when not NULL), the target n->a
 * joins `to`; a target that is not a plain name (a tuple) makes `to` bad. */
static void add_target_of(const struct jnode *n, const struct names_set *from, struct names_set *to,
                          const char *key)
{
    for (size_t i = 0; i < from->n; i++)
        if (var_or_elems(n->b, from->v[i], key)) {
            if (n->a->type != JN_NAME)
                to->bad = true;
            else
                add_name(to, n->a->name);
            return;
        }
}

/* {% set x = <access of a name in from> %}: x joins `to` (which is `from` itself here) */
static void visit_assign(const struct jnode *n, struct names_set *from, struct names_set *to)
{
    if (n->type == JN_SET && n->b)
        add_target_of(n, from, to, NULL);
}

/* {% for m in <access of a messages name> %}: m is a message */
static void visit_message_loop(const struct jnode *n, struct names_set *from, struct names_set *to)
{
    if (n->type == JN_FOR)
        add_target_of(n, from, to, NULL);
}

/* {% for c in m.content %} for a message name m; only the first one (in template order)
 * counts, as vLLM takes next() of its search */
static void visit_content_loop(const struct jnode *n, struct names_set *from, struct names_set *to)
{
    if (n->type == JN_FOR && to->n == 0 && !to->bad)
        add_target_of(n, from, to, "content");
}

bool jinja_template_loops_over_message_content(const struct jinja_template *t)
{
    struct names_set msgs = {.n = 0}, items = {.n = 0}, content = {.n = 0};
    msgs.v[msgs.n++] = "messages";
    size_t before;
    do { /* names set from messages, transitively */
        before = msgs.n;
        walk(t->root, visit_assign, &msgs, &msgs);
    } while (msgs.n != before && !msgs.bad);
    walk(t->root, visit_message_loop, &msgs, &items);
    walk(t->root, visit_content_loop, &items, &content);
    if (msgs.bad || items.bad || content.bad) /* vLLM's detection fails: default "string" */
        return false;
    return content.n > 0;
}

struct jinja_ctx *jinja_ctx_create(void)
{
    struct jinja_ctx *c = xcalloc(1, sizeof(*c));
    ja_init(&c->arena);
    c->vars = jv_dict_new(&c->arena, 16);
    return c;
}

void jinja_ctx_destroy(struct jinja_ctx *c)
{
    if (!c)
        return;
    ja_deinit(&c->arena);
    free(c);
}

static void ctx_bind(struct jinja_ctx *c, const char *name, struct jinja_value v)
{
    jv_dict_set(&c->arena, c->vars.u.dict, jv_strdup(&c->arena, name, strlen(name)), v);
}

int jinja_ctx_set_json(struct jinja_ctx *c, const char *name, const char *json, size_t len,
                       struct jinja_error *err)
{
    struct jinja_value v;
    err->line = 0;
    int rc = jv_json_parse(&c->arena, json, len, &v, err->msg, sizeof(err->msg));
    if (rc < 0)
        return rc;
    ctx_bind(c, name, v);
    return 0;
}

int jinja_ctx_merge_json(struct jinja_ctx *c, const char *json, size_t len, struct jinja_error *err)
{
    struct jinja_value v;
    err->line = 0;
    int rc = jv_json_parse(&c->arena, json, len, &v, err->msg, sizeof(err->msg));
    if (rc < 0)
        return rc;
    if (v.kind != JV_DICT) {
        snprintf(err->msg, sizeof(err->msg), "variables must be a JSON object");
        return ERR_INVAL;
    }
    for (size_t i = 0; i < v.u.dict->n; i++)
        jv_dict_set(&c->arena, c->vars.u.dict, v.u.dict->k[i], v.u.dict->v[i]);
    return 0;
}

void jinja_ctx_set_bool(struct jinja_ctx *c, const char *name, bool v)
{
    ctx_bind(c, name, jv_bool(v));
}

void jinja_ctx_set_str(struct jinja_ctx *c, const char *name, const char *s)
{
    ctx_bind(c, name, jv_strdup(&c->arena, s, strlen(s)));
}

void jinja_ctx_set_none(struct jinja_ctx *c, const char *name)
{
    ctx_bind(c, name, jv_none());
}

struct jarena *jinja_ctx_arena(struct jinja_ctx *c)
{
    return &c->arena;
}

void jinja_ctx_bind(struct jinja_ctx *c, const char *name, struct jinja_value v)
{
    ctx_bind(c, name, v);
}

int jinja_template_render(const struct jinja_template *t, struct jinja_ctx *c, char **out,
                          size_t *out_len, struct jinja_error *err)
{
    struct buf b = {0};
    int rc = jinja_eval_render(t, &c->arena, c->vars.u.dict, &b, err);
    if (rc < 0) {
        buf_deinit(&b);
        *out = NULL;
        *out_len = 0;
        return rc;
    }
    if (!b.data)
        b.data = xstrdup("");
    *out = b.data;
    *out_len = b.len;
    return 0;
}
