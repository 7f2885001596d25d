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
    struct jbuf b = {0};
    int rc = jinja_eval_render(t, &c->arena, c->vars.u.dict, &b, err);
    if (rc < 0) {
        jbuf_free(&b);
        *out = NULL;
        *out_len = 0;
        return rc;
    }
    if (!b.p)
        b.p = xstrdup("");
    *out = b.p;
    *out_len = b.n;
    return 0;
}
