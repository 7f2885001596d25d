/* jinja expression parser: jinja2's grammar and precedence, lowest first: condexpr, or, and,
 * not, compare (== != < <= > >= in, not in), + -, ~, * / // %, **, unary - +, then primary with
 * postfix (.attr, [index], [a:b:c], call) and filters / `is` tests. Unknown filters and tests are
 * rejected here with their line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "jinja_parse.h"

static struct jnode *parse_unary(struct ps *p, bool with_filter);
static struct jnode *parse_or(struct ps *p);

static int parse_call_args(struct ps *p, struct jnode *call)
{
    /* current token is '(' */
    struct nvec pos = {0}, kw = {0};
    p->i++;
    while (!is_op(cur(p), JOP_RPAREN)) {
        if (pos.n + kw.n > 0 && jps_expect_op(p, JOP_COMMA, ",") < 0)
            return ERR_INVAL;
        if (is_op(cur(p), JOP_RPAREN))
            break;
        if (is_op(cur(p), JOP_MUL) || is_op(cur(p), JOP_POW))
            return jps_fail(p, cur(p)->line, "unsupported call syntax '*args' / '**kwargs'");
        if (cur(p)->type == JT_NAME && is_op(look(p, 1), JOP_ASSIGN)) {
            struct jnode *k = jps_mk(p, JN_KWARG, cur(p)->line);
            k->name = jps_intern(p, cur(p)->s, cur(p)->n);
            p->i += 2;
            if (!(k->a = jps_expression(p, true)))
                return ERR_INVAL;
            jps_nvec_push(p, &kw, k);
        } else {
            if (kw.n)
                return jps_fail(p, cur(p)->line, "positional argument after keyword argument");
            struct jnode *e = jps_expression(p, true);
            if (!e)
                return ERR_INVAL;
            jps_nvec_push(p, &pos, e);
        }
    }
    p->i++;
    call->kids = pos.v;
    call->n_kids = pos.n;
    call->kw = kw.v;
    call->n_kw = kw.n;
    return 0;
}

static struct jnode *parse_primary(struct ps *p)
{
    struct jtoken *t = cur(p);
    struct jnode *n;
    switch (t->type) {
    case JT_NAME:
        p->i++;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") ||
            !strcmp(t->s, "False")) {
            n = jps_mk(p, JN_CONST, t->line);
            n->val = jv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            n = jps_mk(p, JN_CONST, t->line);
            n->val = jv_none();
        } else {
            n = jps_mk(p, JN_NAME, t->line);
            n->name = jps_intern(p, t->s, t->n);
        }
        return n;
    case JT_STRING: {
        n = jps_mk(p, JN_CONST, t->line);
        n->val = t->val;
        p->i++;
        if (cur(p)->type == JT_STRING) { /* adjacent literals concatenate */
            struct buf b = {0};
            buf_append(&b, n->val.u.s.s, n->val.u.s.n);
            while (cur(p)->type == JT_STRING) {
                buf_append(&b, cur(p)->val.u.s.s, cur(p)->val.u.s.n);
                p->i++;
            }
            n->val = jv_strdup(p->a, b.data, b.len);
            buf_deinit(&b);
        }
        return n;
    }
    case JT_INT:
    case JT_FLOAT:
        n = jps_mk(p, JN_CONST, t->line);
        n->val = t->val;
        p->i++;
        return n;
    case JT_OP:
        if (t->op == JOP_LPAREN) {
            p->i++;
            n = jps_tuple(p, true, NULL, true);
            if (!n || jps_expect_op(p, JOP_RPAREN, ")") < 0)
                return NULL;
            return n;
        }
        if (t->op == JOP_LBRACKET) {
            struct nvec items = {0};
            n = jps_mk(p, JN_LIST, t->line);
            p->i++;
            while (!is_op(cur(p), JOP_RBRACKET)) {
                if (items.n && jps_expect_op(p, JOP_COMMA, ",") < 0)
                    return NULL;
                if (is_op(cur(p), JOP_RBRACKET))
                    break;
                struct jnode *e = jps_expression(p, true);
                if (!e)
                    return NULL;
                jps_nvec_push(p, &items, e);
            }
            p->i++;
            n->kids = items.v;
            n->n_kids = items.n;
            return n;
        }
        if (t->op == JOP_LBRACE) {
            struct nvec keys = {0}, vals = {0};
            n = jps_mk(p, JN_DICT, t->line);
            p->i++;
            while (!is_op(cur(p), JOP_RBRACE)) {
                if (keys.n && jps_expect_op(p, JOP_COMMA, ",") < 0)
                    return NULL;
                if (is_op(cur(p), JOP_RBRACE))
                    break;
                struct jnode *k = jps_expression(p, true);
                if (!k || jps_expect_op(p, JOP_COLON, ":") < 0)
                    return NULL;
                struct jnode *v = jps_expression(p, true);
                if (!v)
                    return NULL;
                jps_nvec_push(p, &keys, k);
                jps_nvec_push(p, &vals, v);
            }
            p->i++;
            n->kids = keys.v;
            n->n_kids = keys.n;
            n->kw = vals.v;
            n->n_kw = vals.n;
            return n;
        }
        break;
    default:
        break;
    }
    jps_fail(p, t->line, "unexpected %s", jps_tok_desc(t));
    return NULL;
}

static struct jnode *parse_subscript(struct ps *p, struct jnode *obj)
{
    struct jtoken *t = cur(p);
    if (is_op(t, JOP_DOT)) {
        p->i++;
        struct jtoken *a = cur(p);
        struct jnode *n;
        if (a->type == JT_NAME) {
            n = jps_mk(p, JN_GETATTR, a->line);
            n->a = obj;
            n->name = jps_intern(p, a->s, a->n);
        } else if (a->type == JT_INT) {
            n = jps_mk(p, JN_GETITEM, a->line);
            n->a = obj;
            n->b = jps_mk(p, JN_CONST, a->line);
            n->b->val = a->val;
        } else {
            jps_fail(p, a->line, "expected a name after '.'");
            return NULL;
        }
        p->i++;
        return n;
    }
    /* '[' subscript: index or slice */
    p->i++;
    struct jnode *parts[3] = {NULL, NULL, NULL};
    int nparts = 0;
    bool is_slice = false;
    for (;;) {
        if (is_op(cur(p), JOP_COLON)) {
            is_slice = true;
            if (nparts >= 2) {
                jps_fail(p, cur(p)->line, "bad slice");
                return NULL;
            }
            nparts++;
            p->i++;
            continue;
        }
        if (is_op(cur(p), JOP_RBRACKET))
            break;
        if (is_op(cur(p), JOP_COMMA)) {
            jps_fail(p, cur(p)->line, "unsupported subscript with several indices");
            return NULL;
        }
        if (parts[nparts]) {
            jps_fail(p, cur(p)->line, "bad subscript");
            return NULL;
        }
        if (!(parts[nparts] = jps_expression(p, true)))
            return NULL;
    }
    p->i++;
    struct jnode *n;
    if (is_slice) {
        n = jps_mk(p, JN_SLICE, t->line);
        n->b = parts[0];
        n->c = parts[1];
        n->d = parts[2];
    } else {
        if (!parts[0]) {
            jps_fail(p, t->line, "empty subscript");
            return NULL;
        }
        n = jps_mk(p, JN_GETITEM, t->line);
        n->b = parts[0];
    }
    n->a = obj;
    return n;
}

static struct jnode *parse_postfix(struct ps *p, struct jnode *n)
{
    while (n) {
        struct jtoken *t = cur(p);
        if (is_op(t, JOP_DOT) || is_op(t, JOP_LBRACKET)) {
            n = parse_subscript(p, n);
        } else if (is_op(t, JOP_LPAREN)) {
            struct jnode *c = jps_mk(p, JN_CALL, t->line);
            c->a = n;
            if (parse_call_args(p, c) < 0)
                return NULL;
            n = c;
        } else {
            break;
        }
    }
    return n;
}

static const char *dotted_name(struct ps *p)
{
    struct jtoken *t = cur(p);
    if (t->type != JT_NAME) {
        jps_fail(p, t->line, "expected a name, got %s", jps_tok_desc(t));
        return NULL;
    }
    p->i++;
    if (!is_op(cur(p), JOP_DOT))
        return t->s;
    struct buf b = {0};
    buf_puts(&b, t->s);
    while (is_op(cur(p), JOP_DOT) && look(p, 1)->type == JT_NAME) {
        buf_putc(&b, '.');
        buf_puts(&b, look(p, 1)->s);
        p->i += 2;
    }
    const char *r = ja_strndup(p->a, b.data, b.len);
    buf_deinit(&b);
    return r;
}

/* One filter (name and optional arguments) applied to n; p->i is at the name. */
static struct jnode *parse_one_filter(struct ps *p, struct jnode *n)
{
    int line = cur(p)->line;
    const char *name = dotted_name(p);
    if (!name)
        return NULL;
    int id = jinja_filter_id(name);
    if (id < 0) {
        jps_fail(p, line, "unsupported filter '%s'", name);
        return NULL;
    }
    struct jnode *f = jps_mk(p, JN_FILTER, line);
    f->a = n;
    f->op = id;
    f->name = jps_intern(p, name, strlen(name));
    if (is_op(cur(p), JOP_LPAREN) && parse_call_args(p, f) < 0)
        return NULL;
    return f;
}

struct jnode *jps_filter_chain(struct ps *p, struct jnode *operand)
{
    struct jnode *n = parse_one_filter(p, operand);
    while (n && is_op(cur(p), JOP_PIPE)) {
        p->i++;
        n = parse_one_filter(p, n);
    }
    return n;
}

static struct jnode *parse_filter_expr(struct ps *p, struct jnode *n)
{
    while (n) {
        struct jtoken *t = cur(p);
        if (is_op(t, JOP_PIPE)) {
            p->i++;
            n = parse_one_filter(p, n);
        } else if (is_name(t, "is")) {
            p->i++;
            bool neg = false;
            if (is_name(cur(p), "not")) {
                neg = true;
                p->i++;
            }
            int line = cur(p)->line;
            const char *name = dotted_name(p);
            if (!name)
                return NULL;
            int id = jinja_test_id(name);
            if (id < 0) {
                jps_fail(p, line, "unsupported test '%s'", name);
                return NULL;
            }
            struct jnode *f = jps_mk(p, JN_TEST, line);
            f->a = n;
            f->op = id;
            f->neg = neg;
            f->name = jps_intern(p, name, strlen(name));
            struct jtoken *c = cur(p);
            if (is_op(c, JOP_LPAREN)) {
                if (parse_call_args(p, f) < 0)
                    return NULL;
            } else if ((c->type == JT_NAME || c->type == JT_STRING || c->type == JT_INT ||
                        c->type == JT_FLOAT || is_op(c, JOP_LBRACKET) || is_op(c, JOP_LBRACE)) &&
                       !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
                if (is_name(c, "is")) {
                    jps_fail(p, c->line, "You cannot chain multiple tests with is");
                    return NULL;
                }
                struct jnode *arg = parse_postfix(p, parse_primary(p));
                if (!arg)
                    return NULL;
                f->kids = ja_alloc(p->a, sizeof(*f->kids));
                f->kids[0] = arg;
                f->n_kids = 1;
            }
            n = f;
        } else if (is_op(t, JOP_LPAREN)) {
            struct jnode *c = jps_mk(p, JN_CALL, t->line);
            c->a = n;
            if (parse_call_args(p, c) < 0)
                return NULL;
            n = c;
        } else {
            break;
        }
    }
    return n;
}

static struct jnode *parse_unary_(struct ps *p, bool with_filter);

static struct jnode *parse_unary(struct ps *p, bool with_filter)
{
    if (p->depth >= JPS_DEPTH_MAX) {
        jps_fail(p, cur(p)->line, "expression nested too deeply");
        return NULL;
    }
    p->depth++;
    struct jnode *n = parse_unary_(p, with_filter);
    p->depth--;
    return n;
}

static struct jnode *parse_unary_(struct ps *p, bool with_filter)
{
    struct jtoken *t = cur(p);
    struct jnode *n;
    if (is_op(t, JOP_SUB) || is_op(t, JOP_ADD)) {
        p->i++;
        n = jps_mk(p, is_op(t, JOP_SUB) ? JN_NEG : JN_POS, t->line);
        if (!(n->a = parse_unary(p, false)))
            return NULL;
    } else {
        n = parse_postfix(p, parse_primary(p));
    }
    if (n && with_filter)
        n = parse_filter_expr(p, n);
    return n;
}

static struct jnode *binop(struct ps *p, int op, int line, struct jnode *l, struct jnode *r)
{
    struct jnode *n = jps_mk(p, JN_BINOP, line);
    n->op = op;
    n->a = l;
    n->b = r;
    return n;
}

static struct jnode *parse_pow(struct ps *p)
{
    struct jnode *l = parse_unary(p, true);
    while (l && is_op(cur(p), JOP_POW)) {
        int line = cur(p)->line;
        p->i++;
        struct jnode *r = parse_unary(p, true);
        if (!r)
            return NULL;
        l = binop(p, 'P', line, l, r);
    }
    return l;
}

static struct jnode *parse_math2(struct ps *p)
{
    struct jnode *l = parse_pow(p);
    while (l) {
        struct jtoken *t = cur(p);
        int op = is_op(t, JOP_MUL)        ? '*'
                 : is_op(t, JOP_DIV)      ? '/'
                 : is_op(t, JOP_FLOORDIV) ? 'F'
                 : is_op(t, JOP_MOD)      ? '%'
                                          : 0;
        if (!op)
            break;
        p->i++;
        struct jnode *r = parse_pow(p);
        if (!r)
            return NULL;
        l = binop(p, op, t->line, l, r);
    }
    return l;
}

static struct jnode *parse_concat(struct ps *p)
{
    struct jnode *first = parse_math2(p);
    if (!first || !is_op(cur(p), JOP_TILDE))
        return first;
    struct nvec args = {0};
    jps_nvec_push(p, &args, first);
    int line = cur(p)->line;
    while (is_op(cur(p), JOP_TILDE)) {
        p->i++;
        struct jnode *e = parse_math2(p);
        if (!e)
            return NULL;
        jps_nvec_push(p, &args, e);
    }
    struct jnode *n = jps_mk(p, JN_CONCAT, line);
    n->kids = args.v;
    n->n_kids = args.n;
    return n;
}

static struct jnode *parse_math1(struct ps *p)
{
    struct jnode *l = parse_concat(p);
    while (l && (is_op(cur(p), JOP_ADD) || is_op(cur(p), JOP_SUB))) {
        struct jtoken *t = cur(p);
        p->i++;
        struct jnode *r = parse_concat(p);
        if (!r)
            return NULL;
        l = binop(p, is_op(t, JOP_ADD) ? '+' : '-', t->line, l, r);
    }
    return l;
}

static struct jnode *parse_compare(struct ps *p)
{
    struct jnode *first = parse_math1(p);
    if (!first)
        return NULL;
    struct nvec ops = {0};
    for (;;) {
        struct jtoken *t = cur(p);
        int op = -1;
        if (t->type == JT_OP) {
            switch (t->op) {
            case JOP_EQ:
                op = JCMP_EQ;
                break;
            case JOP_NE:
                op = JCMP_NE;
                break;
            case JOP_LT:
                op = JCMP_LT;
                break;
            case JOP_LE:
                op = JCMP_LE;
                break;
            case JOP_GT:
                op = JCMP_GT;
                break;
            case JOP_GE:
                op = JCMP_GE;
                break;
            default:
                break;
            }
            if (op >= 0)
                p->i++;
        } else if (is_name(t, "in")) {
            op = JCMP_IN;
            p->i++;
        } else if (is_name(t, "not") && is_name(look(p, 1), "in")) {
            op = JCMP_NOTIN;
            p->i += 2;
        }
        if (op < 0)
            break;
        struct jnode *c = jps_mk(p, JN_CMPOP, t->line);
        c->op = op;
        if (!(c->a = parse_math1(p)))
            return NULL;
        jps_nvec_push(p, &ops, c);
    }
    if (!ops.n)
        return first;
    struct jnode *n = jps_mk(p, JN_COMPARE, first->line);
    n->a = first;
    n->kids = ops.v;
    n->n_kids = ops.n;
    return n;
}

static struct jnode *parse_not(struct ps *p)
{
    if (is_name(cur(p), "not")) {
        struct jnode *n = jps_mk(p, JN_NOT, cur(p)->line);
        p->i++;
        if (p->depth >= JPS_DEPTH_MAX) {
            jps_fail(p, n->line, "expression nested too deeply");
            return NULL;
        }
        p->depth++;
        n->a = parse_not(p);
        p->depth--;
        return n->a ? n : NULL;
    }
    return parse_compare(p);
}

static struct jnode *parse_and(struct ps *p)
{
    struct jnode *l = parse_not(p);
    while (l && is_name(cur(p), "and")) {
        struct jnode *n = jps_mk(p, JN_AND, cur(p)->line);
        p->i++;
        n->a = l;
        if (!(n->b = parse_not(p)))
            return NULL;
        l = n;
    }
    return l;
}

static struct jnode *parse_or(struct ps *p)
{
    struct jnode *l = parse_and(p);
    while (l && is_name(cur(p), "or")) {
        struct jnode *n = jps_mk(p, JN_OR, cur(p)->line);
        p->i++;
        n->a = l;
        if (!(n->b = parse_and(p)))
            return NULL;
        l = n;
    }
    return l;
}

static struct jnode *parse_condexpr(struct ps *p)
{
    struct jnode *e1 = parse_or(p);
    while (e1 && is_name(cur(p), "if")) {
        struct jnode *n = jps_mk(p, JN_COND, cur(p)->line);
        p->i++;
        if (!(n->a = parse_or(p)))
            return NULL;
        n->b = e1;
        if (is_name(cur(p), "else")) {
            p->i++;
            if (!(n->c = parse_condexpr(p)))
                return NULL;
        }
        e1 = n;
    }
    return e1;
}

struct jnode *jps_expression(struct ps *p, bool with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static bool tuple_end(struct ps *p, const char *extra_end)
{
    struct jtoken *t = cur(p);
    if (t->type == JT_VAR_END || t->type == JT_BLOCK_END || t->type == JT_EOF ||
        is_op(t, JOP_RPAREN))
        return true;
    return extra_end && is_name(t, extra_end);
}

struct jnode *jps_tuple(struct ps *p, bool with_condexpr, const char *extra_end,
                        bool explicit_parens)
{
    int line = cur(p)->line;
    struct nvec items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n) {
            if (!is_op(cur(p), JOP_COMMA))
                break;
            p->i++;
            is_tuple = true;
        }
        if (tuple_end(p, extra_end))
            break;
        struct jnode *e = jps_expression(p, with_condexpr);
        if (!e)
            return NULL;
        jps_nvec_push(p, &items, e);
    }
    if (!is_tuple) {
        if (items.n)
            return items.v[0];
        if (!explicit_parens) {
            jps_fail(p, line, "expected an expression, got %s", jps_tok_desc(cur(p)));
            return NULL;
        }
    }
    struct jnode *n = jps_mk(p, JN_TUPLE, line);
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}
