/* jinja parser internals shared by jinja_parse.c (statements, checks) and jinja_parse_expr.c
 * (expressions): the parser state, token accessors and node helpers. */
#ifndef TEXT_JINJA_PARSE_H
#define TEXT_JINJA_PARSE_H

#include <string.h>

#include "jinja_lex.h"

struct ps {
    struct jinja_template *t;
    struct jarena *a;
    struct jtokens toks;
    size_t i;
    struct jinja_error *err;
    const char **names; // interned names
    size_t n_names, cap_names;
    int loop_depth;  // for break/continue
    int scope_depth; // for/macro nesting (macros only at top level)
    int depth;       // recursion depth of the parser (bounded by JPS_DEPTH_MAX)
};

#define JPS_DEPTH_MAX                                                                              \
    200 /* nested expressions / blocks: keeps the recursion off the stack edge                     \
         */

/* growable node array kept in the arena */
struct nvec {
    struct jnode **v;
    size_t n, cap;
};

static inline struct jtoken *cur(struct ps *p)
{
    return &p->toks.v[p->i];
}

static inline struct jtoken *look(struct ps *p, size_t k)
{
    size_t j = p->i + k;
    return j < p->toks.n ? &p->toks.v[j] : &p->toks.v[p->toks.n - 1];
}

static inline bool is_op(const struct jtoken *t, enum jop op)
{
    return t->type == JT_OP && t->op == op;
}

static inline bool is_name(const struct jtoken *t, const char *name)
{
    return t->type == JT_NAME && strcmp(t->s, name) == 0;
}

/* Record the first error as "chat template line N: ..."; returns ERR_INVAL. */
int jps_fail(struct ps *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *jps_intern(struct ps *p, const char *s, size_t n);
struct jnode *jps_mk(struct ps *p, enum jn_type type, int line);
void jps_nvec_push(struct ps *p, struct nvec *v, struct jnode *n);
const char *jps_tok_desc(const struct jtoken *t);
int jps_expect_op(struct ps *p, enum jop op, const char *what);
/* `name(args)|name2...` applied to operand ({% filter %} blocks); p->i is at the first name */
struct jnode *jps_filter_chain(struct ps *p, struct jnode *operand);
/* expression (with or without the `a if b else c` form) / comma tuple; NULL on error */
struct jnode *jps_expression(struct ps *p, bool with_condexpr);
struct jnode *jps_tuple(struct ps *p, bool with_condexpr, const char *extra_end,
                        bool explicit_parens);

#endif
