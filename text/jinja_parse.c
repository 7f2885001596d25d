/* jinja parser: tokens -> AST. This file holds the shared helpers, the statements (if, for, set,
 * macro, break/continue, generation) and the checks run after parsing; expressions are in
 * jinja_parse_expr.c. Tags, functions and methods the evaluator does not implement are rejected
 * here with their line. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "jinja_parse.h"

int jps_fail(struct ps *p, int line, const char *fmt, ...)
{
    if (p->err->msg[0]) /* keep the first error */
        return ERR_INVAL;
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    p->err->line = line;
    snprintf(p->err->msg, sizeof(p->err->msg), "chat template line %d: %s", line, what);
    return ERR_INVAL;
}

const char *jps_intern(struct ps *p, const char *s, size_t n)
{
    for (size_t i = 0; i < p->n_names; i++)
        if (strlen(p->names[i]) == n && memcmp(p->names[i], s, n) == 0)
            return p->names[i];
    if (p->n_names == p->cap_names) {
        p->cap_names = p->cap_names ? p->cap_names * 2 : 64;
        const char **nn = ja_alloc(p->a, p->cap_names * sizeof(*nn));
        if (p->n_names)
            memcpy(nn, p->names, p->n_names * sizeof(*nn));
        p->names = nn;
    }
    const char *r = ja_strndup(p->a, s, n);
    p->names[p->n_names++] = r;
    return r;
}

struct jnode *jps_mk(struct ps *p, enum jn_type type, int line)
{
    struct jnode *n = ja_alloc(p->a, sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->type = (uint8_t)type;
    n->line = line;
    return n;
}

void jps_nvec_push(struct ps *p, struct nvec *v, struct jnode *n)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 4;
        struct jnode **nv = ja_alloc(p->a, v->cap * sizeof(*nv));
        if (v->n)
            memcpy(nv, v->v, v->n * sizeof(*nv));
        v->v = nv;
    }
    v->v[v->n++] = n;
}

const char *jps_tok_desc(const struct jtoken *t)
{
    switch (t->type) {
    case JT_EOF:
        return "end of template";
    case JT_BLOCK_END:
        return "'%}'";
    case JT_VAR_END:
        return "'}}'";
    case JT_NAME:
        return t->s;
    case JT_STRING:
        return "string";
    case JT_INT:
    case JT_FLOAT:
        return "number";
    default:
        return "operator";
    }
}

int jps_expect_op(struct ps *p, enum jop op, const char *what)
{
    if (!is_op(cur(p), op))
        return jps_fail(p, cur(p)->line, "expected '%s', got %s", what, jps_tok_desc(cur(p)));
    p->i++;
    return 0;
}

// ---- statements ----

/* for / set targets: name, (a, b), a, b, or ns.attr when with_ns */
static struct jnode *parse_assign_target(struct ps *p, bool with_ns, const char *extra_end)
{
    struct jtoken *t = cur(p);
    if (with_ns && t->type == JT_NAME && is_op(look(p, 1), JOP_DOT) &&
        look(p, 2)->type == JT_NAME) {
        struct jnode *n = jps_mk(p, JN_NSATTR, t->line);
        n->a = jps_mk(p, JN_NAME, t->line);
        n->a->name = jps_intern(p, t->s, t->n);
        n->name = jps_intern(p, look(p, 2)->s, look(p, 2)->n);
        p->i += 3;
        return n;
    }
    struct nvec items = {0};
    bool parens = is_op(t, JOP_LPAREN);
    if (parens)
        p->i++;
    bool is_tuple = false;
    for (;;) {
        struct jtoken *c = cur(p);
        if (c->type != JT_NAME) {
            jps_fail(p, c->line, "cannot assign to %s", jps_tok_desc(c));
            return NULL;
        }
        struct jnode *n = jps_mk(p, JN_NAME, c->line);
        n->name = jps_intern(p, c->s, c->n);
        jps_nvec_push(p, &items, n);
        p->i++;
        if (!is_op(cur(p), JOP_COMMA))
            break;
        p->i++;
        is_tuple = true;
        if ((parens && is_op(cur(p), JOP_RPAREN)) || (extra_end && is_name(cur(p), extra_end)) ||
            is_op(cur(p), JOP_ASSIGN))
            break;
    }
    if (parens && jps_expect_op(p, JOP_RPAREN, ")") < 0)
        return NULL;
    if (!is_tuple && !parens)
        return items.v[0];
    if (!is_tuple && items.n == 1)
        return items.v[0];
    struct jnode *n = jps_mk(p, JN_TUPLE, t->line);
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

// ---- statements ----

static struct jnode *parse_body(struct ps *p, const char *const *ends, size_t n_ends);

static int expect_block_end(struct ps *p)
{
    if (cur(p)->type != JT_BLOCK_END)
        return jps_fail(p, cur(p)->line, "expected '%%}', got %s", jps_tok_desc(cur(p)));
    p->i++;
    return 0;
}

/* End of a block header: jinja2 allows a Python-style colon before %}. */
static int expect_body_start(struct ps *p)
{
    if (is_op(cur(p), JOP_COLON))
        p->i++;
    return expect_block_end(p);
}

/* After parse_body stopped at `{% name`, consume name (p->i is at the name). */
static const char *end_tag(struct ps *p)
{
    const char *s = cur(p)->s;
    p->i++;
    return s;
}

static struct jnode *parse_if(struct ps *p, int line)
{
    static const char *const ends[] = {"elif", "else", "endif"};
    struct jnode *n = jps_mk(p, JN_IF, line);
    if (!(n->a = jps_tuple(p, false, NULL, false)) || expect_body_start(p) < 0)
        return NULL;
    if (!(n->b = parse_body(p, ends, 3)))
        return NULL;
    const char *e = end_tag(p);
    if (!strcmp(e, "elif")) {
        if (!(n->c = parse_if(p, p->toks.v[p->i - 1].line)))
            return NULL;
        return n; /* the elif chain consumed endif */
    }
    if (!strcmp(e, "else")) {
        static const char *const ends2[] = {"endif"};
        if (expect_body_start(p) < 0 || !(n->c = parse_body(p, ends2, 1)))
            return NULL;
        end_tag(p);
    }
    if (expect_block_end(p) < 0)
        return NULL;
    return n;
}

static struct jnode *parse_for(struct ps *p, int line)
{
    static const char *const ends[] = {"else", "endfor"};
    struct jnode *n = jps_mk(p, JN_FOR, line);
    if (!(n->a = parse_assign_target(p, false, "in")))
        return NULL;
    if (!is_name(cur(p), "in")) {
        jps_fail(p, cur(p)->line, "expected 'in' in for loop");
        return NULL;
    }
    p->i++;
    if (!(n->b = jps_tuple(p, false, "recursive", false)))
        return NULL;
    if (is_name(cur(p), "if")) {
        p->i++;
        if (!(n->e = jps_expression(p, true)))
            return NULL;
    }
    if (is_name(cur(p), "recursive")) {
        jps_fail(p, cur(p)->line, "unsupported construct 'recursive' loop");
        return NULL;
    }
    if (expect_body_start(p) < 0)
        return NULL;
    p->loop_depth++;
    p->scope_depth++;
    n->c = parse_body(p, ends, 2);
    p->loop_depth--;
    if (!n->c)
        return NULL;
    if (!strcmp(end_tag(p), "else")) {
        static const char *const ends2[] = {"endfor"};
        if (expect_body_start(p) < 0 || !(n->d = parse_body(p, ends2, 1)))
            return NULL;
        end_tag(p);
    }
    p->scope_depth--;
    if (expect_block_end(p) < 0)
        return NULL;
    return n;
}

static struct jnode *parse_set(struct ps *p, int line)
{
    struct jnode *n = jps_mk(p, JN_SET, line);
    if (!(n->a = parse_assign_target(p, true, NULL)))
        return NULL;
    if (is_op(cur(p), JOP_ASSIGN)) {
        p->i++;
        if (!(n->b = jps_tuple(p, true, NULL, false)) || expect_block_end(p) < 0)
            return NULL;
        return n;
    }
    if (is_op(cur(p), JOP_COLON))
        p->i++;
    if (cur(p)->type != JT_BLOCK_END) {
        jps_fail(p, cur(p)->line, "unsupported construct: filtered block set");
        return NULL;
    }
    if (n->a->type != JN_NAME) {
        jps_fail(p, line, "block set needs a single name");
        return NULL;
    }
    p->i++;
    static const char *const ends[] = {"endset"};
    if (!(n->c = parse_body(p, ends, 1)))
        return NULL;
    end_tag(p);
    if (expect_block_end(p) < 0)
        return NULL;
    return n;
}

/* `(a, b=default, ...)` into n->kids; p->i is at '('. */
static int parse_params(struct ps *p, struct jnode *n)
{
    if (jps_expect_op(p, JOP_LPAREN, "(") < 0)
        return ERR_INVAL;
    struct nvec params = {0};
    bool seen_default = false;
    while (!is_op(cur(p), JOP_RPAREN)) {
        if (params.n && jps_expect_op(p, JOP_COMMA, ",") < 0)
            return ERR_INVAL;
        if (is_op(cur(p), JOP_RPAREN))
            break;
        if (cur(p)->type != JT_NAME) {
            jps_fail(p, cur(p)->line, "expected a parameter name");
            return ERR_INVAL;
        }
        struct jnode *prm = jps_mk(p, JN_NAME, cur(p)->line);
        prm->name = jps_intern(p, cur(p)->s, cur(p)->n);
        p->i++;
        if (is_op(cur(p), JOP_ASSIGN)) {
            p->i++;
            if (!(prm->a = jps_expression(p, true)))
                return ERR_INVAL;
            seen_default = true;
        } else if (seen_default) {
            jps_fail(p, prm->line, "non-default argument follows default argument");
            return ERR_INVAL;
        }
        jps_nvec_push(p, &params, prm);
    }
    p->i++;
    n->kids = params.v;
    n->n_kids = params.n;
    return 0;
}

static struct jnode *parse_macro(struct ps *p, int line)
{
    if (p->scope_depth > 0) {
        jps_fail(p, line, "unsupported construct: macro defined inside a loop or macro");
        return NULL;
    }
    struct jnode *n = jps_mk(p, JN_MACRO, line);
    if (cur(p)->type != JT_NAME) {
        jps_fail(p, cur(p)->line, "expected a macro name");
        return NULL;
    }
    n->name = jps_intern(p, cur(p)->s, cur(p)->n);
    p->i++;
    if (parse_params(p, n) < 0)
        return NULL;
    if (expect_body_start(p) < 0)
        return NULL;
    static const char *const ends[] = {"endmacro"};
    int saved_loop = p->loop_depth;
    p->loop_depth = 0;
    p->scope_depth++;
    n->c = parse_body(p, ends, 1);
    p->scope_depth--;
    p->loop_depth = saved_loop;
    if (!n->c)
        return NULL;
    end_tag(p);
    if (cur(p)->type == JT_NAME) /* {% endmacro name %} */
        p->i++;
    if (expect_block_end(p) < 0)
        return NULL;
    return n;
}

static struct jnode *parse_statement_(struct ps *p);

static struct jnode *parse_statement(struct ps *p)
{
    if (p->depth >= JPS_DEPTH_MAX) {
        jps_fail(p, cur(p)->line, "blocks nested too deeply");
        return NULL;
    }
    p->depth++;
    struct jnode *n = parse_statement_(p);
    p->depth--;
    return n;
}

static struct jnode *parse_statement_(struct ps *p)
{
    struct jtoken *t = cur(p);
    if (t->type != JT_NAME) {
        jps_fail(p, t->line, "expected a tag name, got %s", jps_tok_desc(t));
        return NULL;
    }
    p->i++;
    if (!strcmp(t->s, "if"))
        return parse_if(p, t->line);
    if (!strcmp(t->s, "for"))
        return parse_for(p, t->line);
    if (!strcmp(t->s, "set"))
        return parse_set(p, t->line);
    if (!strcmp(t->s, "macro"))
        return parse_macro(p, t->line);
    if (!strcmp(t->s, "break") || !strcmp(t->s, "continue")) {
        if (p->loop_depth == 0) {
            jps_fail(p, t->line, "'%s' outside of a loop", t->s);
            return NULL;
        }
        struct jnode *n = jps_mk(p, t->s[0] == 'b' ? JN_BREAK : JN_CONTINUE, t->line);
        if (expect_block_end(p) < 0)
            return NULL;
        return n;
    }
    if (!strcmp(t->s, "with")) {
        static const char *const ends[] = {"endwith"};
        struct jnode *n = jps_mk(p, JN_WITH, t->line);
        struct nvec names = {0}, vals = {0};
        while (cur(p)->type == JT_NAME) {
            struct jnode *nm = jps_mk(p, JN_NAME, cur(p)->line);
            nm->name = jps_intern(p, cur(p)->s, cur(p)->n);
            p->i++;
            if (jps_expect_op(p, JOP_ASSIGN, "=") < 0)
                return NULL;
            struct jnode *v = jps_expression(p, true);
            if (!v)
                return NULL;
            jps_nvec_push(p, &names, nm);
            jps_nvec_push(p, &vals, v);
            if (!is_op(cur(p), JOP_COMMA))
                break;
            p->i++;
        }
        n->kids = names.v;
        n->n_kids = names.n;
        n->kw = vals.v;
        n->n_kw = vals.n;
        if (expect_body_start(p) < 0)
            return NULL;
        p->scope_depth++;
        n->c = parse_body(p, ends, 1);
        p->scope_depth--;
        if (!n->c)
            return NULL;
        end_tag(p);
        return expect_block_end(p) < 0 ? NULL : n;
    }
    if (!strcmp(t->s, "call")) {
        static const char *const ends[] = {"endcall"};
        struct jnode *n = jps_mk(p, JN_CALLBLOCK, t->line);
        if (is_op(cur(p), JOP_LPAREN) && parse_params(p, n) < 0)
            return NULL;
        if (!(n->a = jps_expression(p, true)))
            return NULL;
        if (n->a->type != JN_CALL) {
            jps_fail(p, t->line, "expected a call in {%% call %%}");
            return NULL;
        }
        if (expect_body_start(p) < 0)
            return NULL;
        int saved_loop = p->loop_depth;
        p->loop_depth = 0;
        p->scope_depth++;
        n->c = parse_body(p, ends, 1);
        p->scope_depth--;
        p->loop_depth = saved_loop;
        if (!n->c)
            return NULL;
        end_tag(p);
        return expect_block_end(p) < 0 ? NULL : n;
    }
    if (!strcmp(t->s, "filter")) {
        static const char *const ends[] = {"endfilter"};
        struct jnode *n = jps_mk(p, JN_FILTERBLOCK, t->line);
        if (!(n->a = jps_filter_chain(p, jps_mk(p, JN_BLOCKVAL, t->line))) ||
            expect_body_start(p) < 0)
            return NULL;
        p->scope_depth++;
        n->c = parse_body(p, ends, 1);
        p->scope_depth--;
        if (!n->c)
            return NULL;
        end_tag(p);
        return expect_block_end(p) < 0 ? NULL : n;
    }
    if (!strcmp(t->s, "generation")) { /* HF AssistantTracker: renders its body */
        static const char *const ends[] = {"endgeneration"};
        if (expect_body_start(p) < 0)
            return NULL;
        struct jnode *n = jps_mk(p, JN_SCOPE, t->line);
        p->scope_depth++;
        n->a = parse_body(p, ends, 1);
        p->scope_depth--;
        if (!n->a)
            return NULL;
        end_tag(p);
        if (expect_block_end(p) < 0)
            return NULL;
        return n;
    }
    jps_fail(p, t->line, "unsupported tag '%s'", t->s);
    return NULL;
}

/* Statements until EOF (ends == NULL) or a `{% end %}` tag in ends (left at the tag name). */
static struct jnode *parse_body(struct ps *p, const char *const *ends, size_t n_ends)
{
    struct jnode *body = jps_mk(p, JN_BODY, cur(p)->line);
    struct nvec kids = {0};
    for (;;) {
        struct jtoken *t = cur(p);
        if (t->type == JT_EOF) {
            if (n_ends) {
                jps_fail(p, t->line, "unexpected end of template, expected '%s'", ends[n_ends - 1]);
                return NULL;
            }
            break;
        }
        if (t->type == JT_DATA) {
            struct jnode *n = jps_mk(p, JN_TEXT, t->line);
            n->val = t->val;
            jps_nvec_push(p, &kids, n);
            p->i++;
            continue;
        }
        if (t->type == JT_VAR_BEGIN) {
            p->i++;
            struct jnode *n = jps_mk(p, JN_OUTPUT, t->line);
            if (!(n->a = jps_tuple(p, true, NULL, false)))
                return NULL;
            if (cur(p)->type != JT_VAR_END) {
                jps_fail(p, cur(p)->line, "expected '}}', got %s", jps_tok_desc(cur(p)));
                return NULL;
            }
            p->i++;
            jps_nvec_push(p, &kids, n);
            continue;
        }
        if (t->type == JT_BLOCK_BEGIN) {
            struct jtoken *nm = look(p, 1);
            if (nm->type == JT_NAME) {
                for (size_t k = 0; k < n_ends; k++)
                    if (!strcmp(nm->s, ends[k])) {
                        p->i++;
                        body->kids = kids.v;
                        body->n_kids = kids.n;
                        return body;
                    }
                if (!strncmp(nm->s, "end", 3) || !strcmp(nm->s, "else") || !strcmp(nm->s, "elif")) {
                    jps_fail(p, nm->line, "unexpected '%s'", nm->s);
                    return NULL;
                }
            }
            p->i++;
            struct jnode *n = parse_statement(p);
            if (!n)
                return NULL;
            jps_nvec_push(p, &kids, n);
            continue;
        }
        jps_fail(p, t->line, "unexpected %s", jps_tok_desc(t));
        return NULL;
    }
    body->kids = kids.v;
    body->n_kids = kids.n;
    return body;
}

// ---- checks after parsing ----

static bool uses_name(const struct jnode *n, const char *name)
{
    if (!n)
        return false;
    if (n->type == JN_NAME && n->name == name)
        return true;
    const struct jnode *ch[] = {n->a, n->b, n->c, n->d, n->e};
    for (size_t i = 0; i < ARRAY_LEN(ch); i++)
        if (uses_name(ch[i], name))
            return true;
    for (size_t i = 0; i < n->n_kids; i++)
        if (uses_name(n->kids[i], name))
            return true;
    for (size_t i = 0; i < n->n_kw; i++)
        if (uses_name(n->kw[i], name))
            return true;
    return false;
}

/* Flag the macros whose bodies read varargs / kwargs (jinja2 then accepts extra arguments). */
static void mark_macros(struct jinja_template *t, struct jnode *n)
{
    if (!n)
        return;
    if (n->type == JN_MACRO)
        n->op = (uses_name(n->c, t->name_varargs) ? MACRO_VARARGS : 0) |
                (uses_name(n->c, t->name_kwargs) ? MACRO_KWARGS : 0) |
                (uses_name(n->c, t->name_caller) ? MACRO_CALLER : 0);
    struct jnode *ch[] = {n->a, n->b, n->c, n->d, n->e};
    for (size_t i = 0; i < ARRAY_LEN(ch); i++)
        mark_macros(t, ch[i]);
    for (size_t i = 0; i < n->n_kids; i++)
        mark_macros(t, n->kids[i]);
}

struct names {
    const char **v;
    size_t n;
};

static void collect_macros(struct ps *p, const struct jnode *n, struct names *m)
{
    if (!n)
        return;
    if (n->type == JN_MACRO) {
        const char **nv = ja_alloc(p->a, (m->n + 1) * sizeof(*nv));
        if (m->n)
            memcpy(nv, m->v, m->n * sizeof(*nv));
        nv[m->n++] = n->name;
        m->v = nv;
    }
    const struct jnode *ch[] = {n->a, n->b, n->c, n->d, n->e};
    for (size_t i = 0; i < ARRAY_LEN(ch); i++)
        collect_macros(p, ch[i], m);
    for (size_t i = 0; i < n->n_kids; i++)
        collect_macros(p, n->kids[i], m);
}

static int check_calls(struct ps *p, const struct jnode *n, const struct names *m)
{
    if (!n)
        return 0;
    if (n->type == JN_CALL && n->a->type == JN_NAME) {
        bool ok = jinja_global_id(n->a->name) >= 0 || !strcmp(n->a->name, "caller");
        for (size_t i = 0; !ok && i < m->n; i++)
            ok = m->v[i] == n->a->name;
        if (!ok)
            return jps_fail(p, n->line, "unsupported function '%s'", n->a->name);
    }
    if (n->type == JN_CALL && n->a->type == JN_GETATTR && jinja_method_id(n->a->name) < 0)
        return jps_fail(p, n->line, "unsupported method '%s'", n->a->name);
    const struct jnode *ch[] = {n->a, n->b, n->c, n->d, n->e};
    for (size_t i = 0; i < ARRAY_LEN(ch); i++)
        if (check_calls(p, ch[i], m) < 0)
            return ERR_INVAL;
    for (size_t i = 0; i < n->n_kids; i++)
        if (check_calls(p, n->kids[i], m) < 0)
            return ERR_INVAL;
    for (size_t i = 0; i < n->n_kw; i++)
        if (check_calls(p, n->kw[i], m) < 0)
            return ERR_INVAL;
    return 0;
}

int jinja_parse(struct jinja_template *t, const char *src, size_t len, struct jinja_error *err)
{
    struct ps p = {.t = t, .a = &t->arena, .err = err};
    err->line = 0;
    err->msg[0] = 0;
    int rc = jinja_lex(p.a, src, len, &p.toks, err);
    if (rc < 0)
        goto out;
    t->name_loop = jps_intern(&p, "loop", 4);
    t->name_varargs = jps_intern(&p, "varargs", 7);
    t->name_kwargs = jps_intern(&p, "kwargs", 6);
    t->name_caller = jps_intern(&p, "caller", 6);
    t->root = parse_body(&p, NULL, 0);
    if (!t->root) {
        rc = ERR_INVAL;
        goto out;
    }
    mark_macros(t, t->root);
    struct names macros = {0};
    collect_macros(&p, t->root, &macros);
    rc = check_calls(&p, t->root, &macros);
out:
    free(p.toks.v);
    return rc;
}
