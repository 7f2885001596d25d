/* jinja evaluator: walks the AST with jinja2's scoping (a for loop iteration and a macro call each
 * get a fresh scope; set writes to the innermost scope; macros see the template's top level, not
 * their caller), Python operator semantics and jinja2's default Undefined (prints empty, falsy;
 * attribute access on it is an error). All temporaries go to the render arena. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "jinja_internal.h"

#define RENDER_OUT_MAX ((size_t)64 << 20) /* output bytes (a 262k-token prompt is ~1 MB) */
#define RENDER_ARENA_MAX JINJA_ARENA_MAX  /* temporaries */
#define RENDER_DEPTH_MAX 200               /* nested macro calls */
/* Wall time of one render: loops of loops (two ranges of 100,000 are 10^10 iterations) and
 * per-iteration work on big strings are bounded by time, checked at every loop iteration and
 * every 256 statements. A chat template renders in micro- to milliseconds. */
#define RENDER_TIME_MAX_MS 2000

enum { EXEC_OK = 0, EXEC_BREAK = 1, EXEC_CONTINUE = 2 };

struct jvar {
    const char *name; // interned template name
    struct jinja_value v;
};

struct jscope {
    struct jscope *parent;
    struct jvar *vars;
    size_t n, cap;
};

struct jrt {
    struct jarena *a;
    const struct jinja_template *t;
    const struct jv_dict *vars; // render variables
    struct jscope *root;        // template top level
    struct buf *out;           // where output goes (a macro call swaps it)
    struct jinja_error *err;
    int line;                     // line of the node being evaluated
    struct jinja_value block_val; // body of the innermost {% filter %} block
    int depth;                    // macro call depth
    uint64_t t_end_ns;            // the render's deadline (RENDER_TIME_MAX_MS)
    uint32_t tick;                // statements since the last deadline check
};

/* ERR_TIMEOUT (with the message) once the render is past its deadline, else 0. */
static int check_time(struct jrt *rt)
{
    if (clock_now_ns() <= rt->t_end_ns)
        return 0;
    jrt_fail(rt, "template render took longer than %d ms (loops of loops or big strings)",
             RENDER_TIME_MAX_MS);
    return ERR_TIMEOUT;
}

struct jarena *jrt_arena(struct jrt *rt)
{
    return rt->a;
}

int jrt_fail(struct jrt *rt, const char *fmt, ...)
{
    if (rt->err->msg[0])
        return ERR_INVAL;
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    rt->err->line = rt->line;
    snprintf(rt->err->msg, sizeof(rt->err->msg), "chat template line %d: %s", rt->line, what);
    return ERR_INVAL;
}

int jrt_fail_undefined(struct jrt *rt, struct jinja_value v)
{
    if (v.u.undef_name && (v.flags & JV_F_HINT))
        return jrt_fail(rt, "%s", v.u.undef_name);
    if (v.u.undef_name)
        return jrt_fail(rt, "'%s' is undefined", v.u.undef_name);
    return jrt_fail(rt, "value is undefined");
}

// ---- scopes ----

static void scope_set(struct jrt *rt, struct jscope *s, const char *name, struct jinja_value v)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->vars[i].name == name) {
            s->vars[i].v = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        struct jvar *nv = ja_alloc(rt->a, cap * sizeof(*nv));
        if (s->n)
            memcpy(nv, s->vars, s->n * sizeof(*nv));
        s->vars = nv;
        s->cap = cap;
    }
    s->vars[s->n].name = name;
    s->vars[s->n].v = v;
    s->n++;
}

static struct jinja_value lookup(struct jrt *rt, struct jscope *s, const char *name)
{
    for (; s; s = s->parent)
        for (size_t i = s->n; i > 0; i--)
            if (s->vars[i - 1].name == name)
                return s->vars[i - 1].v;
    struct jinja_value *v = jv_dict_get(rt->vars, name, strlen(name));
    if (v)
        return *v;
    int g = jinja_global_id(name);
    if (g >= 0) {
        struct jinja_value f = {.kind = JV_FUNC, .fn = (uint16_t)g};
        return f;
    }
    return jv_undef(name);
}

// ---- attribute and item access ----

static struct jinja_value undef_attr(struct jrt *rt, struct jinja_value obj, const char *name,
                                     size_t n)
{
    struct buf b = {0};
    buf_printf(&b, "'%s object' has no attribute '%.*s'", jv_type_name(obj), (int)n, name);
    const char *msg = ja_strndup(rt->a, b.data, b.len);
    buf_deinit(&b);
    return jv_undef_hint(msg);
}

static int loop_attr(struct jrt *rt, struct jloop *l, const char *name, struct jinja_value *out)
{
    size_t len = l->items->n;
    if (!strcmp(name, "index"))
        *out = jv_int((int64_t)l->i + 1);
    else if (!strcmp(name, "index0"))
        *out = jv_int((int64_t)l->i);
    else if (!strcmp(name, "first"))
        *out = jv_bool(l->i == 0);
    else if (!strcmp(name, "last"))
        *out = jv_bool(l->i + 1 == len);
    else if (!strcmp(name, "length"))
        *out = jv_int((int64_t)len);
    else if (!strcmp(name, "revindex"))
        *out = jv_int((int64_t)(len - l->i));
    else if (!strcmp(name, "revindex0"))
        *out = jv_int((int64_t)(len - l->i - 1));
    else if (!strcmp(name, "depth"))
        *out = jv_int(l->depth0 + 1);
    else if (!strcmp(name, "depth0"))
        *out = jv_int(l->depth0);
    else if (!strcmp(name, "previtem"))
        *out = l->i > 0 ? l->items->v[l->i - 1] : jv_undef_hint("there is no previous item");
    else if (!strcmp(name, "nextitem"))
        *out = l->i + 1 < len ? l->items->v[l->i + 1] : jv_undef_hint("there is no next item");
    else if (!jinja_method_bind(rt, l->self, name, out))
        *out = undef_attr(rt, l->self, name, strlen(name));
    return 0;
}

int jrt_getattr(struct jrt *rt, struct jinja_value obj, const char *name, size_t n,
                struct jinja_value *out)
{
    struct jinja_value *v;
    switch (obj.kind) {
    case JV_UNDEF:
        return jrt_fail_undefined(rt, obj);
    case JV_DICT:
    case JV_NS:
        if ((v = jv_dict_get(obj.u.dict, name, n))) {
            *out = *v;
            return 0;
        }
        break;
    case JV_LOOP: {
        char tmp[64];
        if (n >= sizeof(tmp))
            break;
        memcpy(tmp, name, n);
        tmp[n] = 0;
        return loop_attr(rt, obj.u.loop, tmp, out);
    }
    default:
        break;
    }
    if (obj.kind != JV_NS && n < 64) {
        char tmp[64];
        memcpy(tmp, name, n);
        tmp[n] = 0;
        if (jinja_method_bind(rt, obj, tmp, out))
            return 0;
    }
    *out = undef_attr(rt, obj, name, n);
    return 0;
}

static int64_t index_of(struct jinja_value k)
{
    return k.kind == JV_BOOL ? (int64_t)k.u.b : k.u.i;
}

int jrt_getitem(struct jrt *rt, struct jinja_value obj, struct jinja_value key,
                struct jinja_value *out)
{
    if (obj.kind == JV_UNDEF)
        return jrt_fail_undefined(rt, obj);
    if (obj.kind == JV_LIST && (obj.flags & JV_F_LAZY)) { /* generators and views: no indexing */
        *out = jv_undef_hint("object is not subscriptable");
        return 0;
    }
    if ((obj.kind == JV_LIST || obj.kind == JV_STR) &&
        (key.kind == JV_INT || key.kind == JV_BOOL)) {
        int64_t i = index_of(key);
        if (obj.kind == JV_LIST) {
            int64_t n = (int64_t)obj.u.list->n;
            if (i < 0)
                i += n;
            if (i >= 0 && i < n) {
                *out = obj.u.list->v[i];
                return 0;
            }
        } else {
            const char *s = obj.u.s.s;
            size_t sn = obj.u.s.n;
            int64_t n = (int64_t)utf8_len(s, sn);
            if (i < 0)
                i += n;
            if (i >= 0 && i < n) {
                size_t off = 0;
                for (int64_t k = 0; k < i; k++)
                    off = utf8_next(s, sn, off);
                *out = jv_str(s + off, utf8_next(s, sn, off) - off);
                return 0;
            }
        }
        struct buf b = {0};
        buf_printf(&b, "%s object has no element %lld", jv_type_name(obj),
                    (long long)index_of(key));
        *out = jv_undef_hint(ja_strndup(rt->a, b.data, b.len));
        buf_deinit(&b);
        return 0;
    }
    if (obj.kind == JV_DICT || obj.kind == JV_NS) {
        struct jinja_value *v = jv_dict_find(obj.u.dict, key);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    if (key.kind == JV_STR)
        return jrt_getattr(rt, obj, key.u.s.s, key.u.s.n, out);
    *out = jv_undef_hint("no such item");
    return 0;
}

/* One explicit slice index, normalised as Python does for a sequence of len (step != 0). */
static int64_t slice_index(const struct jinja_value *i, int64_t len, int64_t step)
{
    int64_t v = index_of(*i);
    if (v < 0)
        v += len;
    if (v < 0)
        v = step > 0 ? 0 : -1;
    if (v >= len)
        v = step > 0 ? len : len - 1;
    return v;
}

/* Python slice index normalisation (step != 0). */
static void slice_bounds(int64_t len, const struct jinja_value *st, const struct jinja_value *sp,
                         int64_t step, int64_t *start, int64_t *stop)
{
    if (step > 0) {
        *start = 0;
        *stop = len;
    } else {
        *start = len - 1;
        *stop = -1;
    }
    if (st)
        *start = slice_index(st, len, step);
    if (sp)
        *stop = slice_index(sp, len, step);
}

static int do_slice(struct jrt *rt, struct jinja_value obj, const struct jinja_value *st,
                    const struct jinja_value *sp, const struct jinja_value *stepv,
                    struct jinja_value *out)
{
    const struct jinja_value *bounds[3] = {st, sp, stepv};
    for (int k = 0; k < 3; k++)
        if (bounds[k] && bounds[k]->kind != JV_INT && bounds[k]->kind != JV_BOOL)
            return jrt_fail(rt, "slice indices must be integers or None");
    int64_t step = stepv ? index_of(*stepv) : 1;
    if (step == 0)
        return jrt_fail(rt, "slice step cannot be zero");
    int64_t start, stop;
    if (obj.kind == JV_DICT)
        return jrt_fail(rt, "unhashable type: 'slice'");
    if (obj.kind == JV_LIST && !(obj.flags & JV_F_LAZY)) {
        slice_bounds((int64_t)obj.u.list->n, st, sp, step, &start, &stop);
        *out = jv_list_new(rt->a, 0);
        out->flags = obj.flags & JV_F_TUPLE;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            jv_list_push(rt->a, out->u.list, obj.u.list->v[i]);
        return 0;
    }
    if (obj.kind == JV_STR) {
        size_t *offs;
        size_t len = utf8_offsets(rt->a, obj.u.s.s, obj.u.s.n, &offs);
        slice_bounds((int64_t)len, st, sp, step, &start, &stop);
        struct buf b = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            buf_append(&b, obj.u.s.s + offs[i], offs[i + 1] - offs[i]);
        *out = jv_strdup(rt->a, b.data ? b.data : "", b.len);
        out->flags = obj.flags & JV_F_SAFE;
        buf_deinit(&b);
        return 0;
    }
    if (obj.kind == JV_UNDEF)
        return jrt_fail_undefined(rt, obj);
    *out = jv_undef_hint("object is not subscriptable");
    return 0;
}

int jrt_iterate(struct jrt *rt, struct jinja_value v, struct jv_list **out)
{
    struct jinja_value l;
    switch (v.kind) {
    case JV_LIST:
        *out = v.u.list;
        return 0;
    case JV_UNDEF:
        *out = jv_list_new(rt->a, 0).u.list;
        return 0;
    case JV_DICT:
        l = jv_list_new(rt->a, v.u.dict->n);
        for (size_t i = 0; i < v.u.dict->n; i++)
            jv_list_push(rt->a, l.u.list, v.u.dict->k[i]);
        *out = l.u.list;
        return 0;
    case JV_STR:
        /* one value per character: check the budget before allocating the list */
        if (rt->a->total >= RENDER_ARENA_MAX ||
            v.u.s.n > (RENDER_ARENA_MAX - rt->a->total) / sizeof(struct jinja_value))
            return jrt_fail(rt, "string too long to iterate");
        l = jv_list_new(rt->a, v.u.s.n);
        for (size_t i = 0; i < v.u.s.n;) {
            size_t j = utf8_next(v.u.s.s, v.u.s.n, i);
            struct jinja_value c = jv_str(v.u.s.s + i, j - i);
            c.flags = v.flags & JV_F_SAFE;
            jv_list_push(rt->a, l.u.list, c);
            i = j;
        }
        *out = l.u.list;
        return 0;
    default:
        return jrt_fail(rt, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* Python prints generators with their memory address: refuse rather than differ. */
static int check_printable(struct jrt *rt, struct jinja_value v)
{
    if (v.kind == JV_LIST && (v.flags & JV_F_GEN))
        return jrt_fail(rt, "cannot print a generator (jinja2 would show its address); "
                            "apply |list first");
    return 0;
}

// ---- expressions ----

static int eval(struct jrt *rt, struct jscope *s, const struct jnode *n, struct jinja_value *out);
static int exec_body(struct jrt *rt, struct jscope *s, const struct jnode *body);

static int eval_args(struct jrt *rt, struct jscope *s, const struct jnode *n, struct jargs *a)
{
    memset(a, 0, sizeof(*a));
    if (n->n_kids) {
        a->pos = ja_alloc(rt->a, n->n_kids * sizeof(*a->pos));
        for (size_t i = 0; i < n->n_kids; i++) {
            int rc = eval(rt, s, n->kids[i], &a->pos[i]);
            if (rc < 0)
                return rc;
        }
        a->n_pos = n->n_kids;
    }
    if (n->n_kw) {
        a->kw = ja_alloc(rt->a, n->n_kw * sizeof(*a->kw));
        a->kw_names = ja_alloc(rt->a, n->n_kw * sizeof(*a->kw_names));
        for (size_t i = 0; i < n->n_kw; i++) {
            a->kw_names[i] = n->kw[i]->name;
            int rc = eval(rt, s, n->kw[i]->a, &a->kw[i]);
            if (rc < 0)
                return rc;
        }
        a->n_kw = n->n_kw;
    }
    return 0;
}

static int64_t as_i(struct jinja_value v)
{
    return v.kind == JV_INT ? v.u.i : (int64_t)v.u.b;
}

static int eval_compare(struct jrt *rt, struct jscope *s, const struct jnode *n,
                        struct jinja_value *out)
{
    struct jinja_value left;
    int rc = eval(rt, s, n->a, &left);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n->n_kids; i++) {
        const struct jnode *c = n->kids[i];
        struct jinja_value right;
        bool r = false;
        if ((rc = eval(rt, s, c->a, &right)) < 0)
            return rc;
        rt->line = c->line;
        switch (c->op) {
        case JCMP_EQ:
            r = jv_equal(left, right);
            break;
        case JCMP_NE:
            r = !jv_equal(left, right);
            break;
        case JCMP_IN:
        case JCMP_NOTIN:
            if ((rc = jrt_contains(rt, right, left, &r)) < 0)
                return rc;
            if (c->op == JCMP_NOTIN)
                r = !r;
            break;
        default:
            if ((rc = jrt_compare_order(rt, left, right, c->op, &r)) < 0)
                return rc;
        }
        if (!r) {
            *out = jv_bool(false);
            return 0;
        }
        left = right;
    }
    *out = jv_bool(true);
    return 0;
}

static int eval(struct jrt *rt, struct jscope *s, const struct jnode *n, struct jinja_value *out)
{
    struct jinja_value a, b;
    struct jargs args;
    int rc;
    rt->line = n->line;
    switch (n->type) {
    case JN_CONST:
        *out = n->val;
        return 0;
    case JN_BLOCKVAL:
        *out = rt->block_val;
        return 0;
    case JN_NAME:
        *out = lookup(rt, s, n->name);
        return 0;
    case JN_GETATTR:
        if ((rc = eval(rt, s, n->a, &a)) < 0)
            return rc;
        rt->line = n->line;
        return jrt_getattr(rt, a, n->name, strlen(n->name), out);
    case JN_GETITEM:
        if ((rc = eval(rt, s, n->a, &a)) < 0 || (rc = eval(rt, s, n->b, &b)) < 0)
            return rc;
        rt->line = n->line;
        return jrt_getitem(rt, a, b, out);
    case JN_SLICE: {
        struct jinja_value v[3];
        const struct jinja_value *p[3] = {NULL, NULL, NULL};
        const struct jnode *parts[3] = {n->b, n->c, n->d};
        if ((rc = eval(rt, s, n->a, &a)) < 0)
            return rc;
        for (int k = 0; k < 3; k++) {
            if (!parts[k])
                continue;
            if ((rc = eval(rt, s, parts[k], &v[k])) < 0)
                return rc;
            if (v[k].kind != JV_NONE)
                p[k] = &v[k];
        }
        rt->line = n->line;
        return do_slice(rt, a, p[0], p[1], p[2], out);
    }
    case JN_CALL:
        if ((rc = eval(rt, s, n->a, &a)) < 0 || (rc = eval_args(rt, s, n, &args)) < 0)
            return rc;
        rt->line = n->line;
        return jrt_call(rt, a, &args, out);
    case JN_FILTER:
        if ((rc = eval(rt, s, n->a, &a)) < 0 || (rc = eval_args(rt, s, n, &args)) < 0)
            return rc;
        rt->line = n->line;
        return jinja_apply_filter(rt, n->op, a, &args, out);
    case JN_TEST: {
        bool r;
        if ((rc = eval(rt, s, n->a, &a)) < 0 || (rc = eval_args(rt, s, n, &args)) < 0)
            return rc;
        rt->line = n->line;
        if ((rc = jinja_apply_test(rt, n->op, a, &args, &r)) < 0)
            return rc;
        *out = jv_bool(n->neg ? !r : r);
        return 0;
    }
    case JN_NEG:
    case JN_POS:
        if ((rc = eval(rt, s, n->a, &a)) < 0)
            return rc;
        rt->line = n->line;
        if (a.kind == JV_INT || a.kind == JV_BOOL)
            *out = jv_int(n->type == JN_NEG ? -as_i(a) : as_i(a));
        else if (a.kind == JV_FLOAT)
            *out = jv_float(n->type == JN_NEG ? -a.u.f : a.u.f);
        else if (a.kind == JV_UNDEF)
            return jrt_fail_undefined(rt, a);
        else
            return jrt_fail(rt, "bad operand type for unary %c: '%s'",
                            n->type == JN_NEG ? '-' : '+', jv_type_name(a));
        return 0;
    case JN_NOT:
        if ((rc = eval(rt, s, n->a, &a)) < 0)
            return rc;
        *out = jv_bool(!jv_truthy(a));
        return 0;
    case JN_AND:
    case JN_OR:
        if ((rc = eval(rt, s, n->a, &a)) < 0)
            return rc;
        if (jv_truthy(a) == (n->type == JN_OR)) {
            *out = a;
            return 0;
        }
        return eval(rt, s, n->b, out);
    case JN_BINOP:
        if ((rc = eval(rt, s, n->a, &a)) < 0 || (rc = eval(rt, s, n->b, &b)) < 0)
            return rc;
        rt->line = n->line;
        return jrt_binop(rt, n->op, a, b, out);
    case JN_CONCAT: {
        struct buf buf = {0};
        for (size_t i = 0; i < n->n_kids; i++) {
            if ((rc = eval(rt, s, n->kids[i], &a)) < 0 || (rc = check_printable(rt, a)) < 0) {
                buf_deinit(&buf);
                return rc;
            }
            jv_to_str(&buf, a);
        }
        *out = jv_strdup(rt->a, buf.data ? buf.data : "", buf.len);
        buf_deinit(&buf);
        return 0;
    }
    case JN_COMPARE:
        return eval_compare(rt, s, n, out);
    case JN_COND:
        if ((rc = eval(rt, s, n->a, &a)) < 0)
            return rc;
        if (jv_truthy(a))
            return eval(rt, s, n->b, out);
        if (n->c)
            return eval(rt, s, n->c, out);
        *out = jv_undef_hint("the inline if-expression evaluated to false and no else section "
                             "was defined");
        return 0;
    case JN_LIST:
    case JN_TUPLE:
        *out = jv_list_new(rt->a, n->n_kids);
        if (n->type == JN_TUPLE)
            out->flags = JV_F_TUPLE;
        for (size_t i = 0; i < n->n_kids; i++) {
            if ((rc = eval(rt, s, n->kids[i], &a)) < 0)
                return rc;
            jv_list_push(rt->a, out->u.list, a);
        }
        return 0;
    case JN_DICT:
        *out = jv_dict_new(rt->a, n->n_kids);
        for (size_t i = 0; i < n->n_kids; i++) {
            if ((rc = eval(rt, s, n->kids[i], &a)) < 0 || (rc = eval(rt, s, n->kw[i], &b)) < 0)
                return rc;
            jv_dict_set(rt->a, out->u.dict, a, b);
        }
        return 0;
    default:
        return jrt_fail(rt, "internal error: bad expression node %d", n->type);
    }
}

// ---- calls ----

/* Run body in scope s with its output captured into *out (an arena string, set only on
 * success). Returns exec_body's status. */
static int capture_body(struct jrt *rt, struct jscope *s, const struct jnode *body,
                        struct jinja_value *out)
{
    struct buf buf = {0};
    struct buf *saved = rt->out;
    rt->out = &buf;
    int rc = exec_body(rt, s, body);
    rt->out = saved;
    if (rc >= 0)
        *out = jv_strdup(rt->a, buf.data ? buf.data : "", buf.len);
    buf_deinit(&buf);
    return rc;
}

static int call_macro(struct jrt *rt, const struct jnode *m, const struct jargs *args,
                      struct jcaller *caller, struct jinja_value *out)
{
    if (caller && !(m->op & MACRO_CALLER))
        return jrt_fail(rt,
                        "macro '%s' was invoked with two values for the special caller "
                        "argument",
                        m->name);
    if (args->n_pos > m->n_kids && !(m->op & MACRO_VARARGS))
        return jrt_fail(rt, "macro '%s' takes not more than %zu argument(s)", m->name, m->n_kids);
    if (rt->depth >= RENDER_DEPTH_MAX)
        return jrt_fail(rt, "macro calls nested too deeply");
    struct jscope scope = {.parent = rt->root};
    bool *bound = ja_alloc(rt->a, (m->n_kids + 1) * sizeof(*bound));
    for (size_t i = 0; i < m->n_kids; i++)
        bound[i] = false;
    struct jinja_value varargs = jv_list_new(rt->a, 0), kwargs = jv_dict_new(rt->a, 0);
    varargs.flags = JV_F_TUPLE;
    for (size_t i = 0; i < args->n_pos; i++) {
        if (i >= m->n_kids) {
            jv_list_push(rt->a, varargs.u.list, args->pos[i]);
            continue;
        }
        scope_set(rt, &scope, m->kids[i]->name, args->pos[i]);
        bound[i] = true;
    }
    for (size_t k = 0; k < args->n_kw; k++) {
        size_t i;
        for (i = 0; i < m->n_kids; i++)
            if (m->kids[i]->name == args->kw_names[k] ||
                !strcmp(m->kids[i]->name, args->kw_names[k]))
                break;
        if (i == m->n_kids && (m->op & MACRO_KWARGS)) {
            jv_dict_set(rt->a, kwargs.u.dict, jv_str(args->kw_names[k], strlen(args->kw_names[k])),
                        args->kw[k]);
            continue;
        }
        if (i == m->n_kids)
            return jrt_fail(rt, "macro '%s' has no argument '%s'", m->name, args->kw_names[k]);
        if (bound[i])
            return jrt_fail(rt, "macro '%s' got multiple values for argument '%s'", m->name,
                            args->kw_names[k]);
        scope_set(rt, &scope, m->kids[i]->name, args->kw[k]);
        bound[i] = true;
    }
    if (caller) {
        struct jinja_value cv = {.kind = JV_CALLER};
        cv.u.caller = caller;
        scope_set(rt, &scope, rt->t->name_caller, cv);
    }
    if (m->op & MACRO_VARARGS)
        scope_set(rt, &scope, rt->t->name_varargs, varargs);
    if (m->op & MACRO_KWARGS)
        scope_set(rt, &scope, rt->t->name_kwargs, kwargs);
    int rc;
    for (size_t i = 0; i < m->n_kids; i++) {
        if (bound[i])
            continue;
        struct jinja_value v = jv_undef(m->kids[i]->name);
        if (m->kids[i]->a && (rc = eval(rt, &scope, m->kids[i]->a, &v)) < 0)
            return rc;
        scope_set(rt, &scope, m->kids[i]->name, v);
    }
    rt->depth++;
    rc = capture_body(rt, &scope, m->c, out);
    rt->depth--;
    return rc < 0 ? rc : 0;
}

/* caller(...) inside a macro: run the {% call %} body in a child of the call site's scope. */
static int call_caller(struct jrt *rt, struct jcaller *c, const struct jargs *args,
                       struct jinja_value *out)
{
    const struct jnode *blk = c->block;
    if (!c->active)
        return jrt_fail(rt, "caller used after its call block ended");
    if (args->n_pos > blk->n_kids || args->n_kw)
        return jrt_fail(rt, "caller takes not more than %zu positional argument(s)", blk->n_kids);
    if (rt->depth >= RENDER_DEPTH_MAX)
        return jrt_fail(rt, "macro calls nested too deeply");
    struct jscope scope = {.parent = c->scope};
    int rc;
    for (size_t i = 0; i < blk->n_kids; i++) {
        struct jinja_value v = jv_undef(blk->kids[i]->name);
        if (i < args->n_pos)
            v = args->pos[i];
        else if (blk->kids[i]->a && (rc = eval(rt, &scope, blk->kids[i]->a, &v)) < 0)
            return rc;
        scope_set(rt, &scope, blk->kids[i]->name, v);
    }
    rt->depth++;
    rc = capture_body(rt, &scope, blk->c, out);
    rt->depth--;
    return rc < 0 ? rc : 0;
}

int jrt_call(struct jrt *rt, struct jinja_value fn, const struct jargs *args,
             struct jinja_value *out)
{
    switch (fn.kind) {
    case JV_MACRO:
        return call_macro(rt, fn.u.macro, args, NULL, out);
    case JV_CALLER:
        return call_caller(rt, fn.u.caller, args, out);
    case JV_FUNC:
        return jinja_call_builtin(rt, fn.fn, fn.u.self, args, out);
    case JV_UNDEF:
        return jrt_fail_undefined(rt, fn);
    default:
        return jrt_fail(rt, "'%s' object is not callable", jv_type_name(fn));
    }
}

// ---- statements ----

static int assign(struct jrt *rt, struct jscope *s, const struct jnode *target,
                  struct jinja_value v)
{
    if (target->type == JN_NAME) {
        scope_set(rt, s, target->name, v);
        return 0;
    }
    if (target->type == JN_NSATTR) {
        struct jinja_value ns = lookup(rt, s, target->a->name);
        if (ns.kind != JV_NS)
            return jrt_fail(rt, "cannot assign attribute on non-namespace object");
        jv_dict_set(rt->a, ns.u.dict, jv_str(target->name, strlen(target->name)), v);
        return 0;
    }
    /* tuple unpacking */
    struct jv_list *items;
    int rc = jrt_iterate(rt, v, &items);
    if (rc < 0)
        return rc;
    if (items->n != target->n_kids)
        return jrt_fail(rt,
                        items->n > target->n_kids ? "too many values to unpack (expected %zu)"
                                                  : "not enough values to unpack (expected %zu)",
                        target->n_kids);
    for (size_t i = 0; i < target->n_kids; i++)
        scope_set(rt, s, target->kids[i]->name, items->v[i]);
    return 0;
}

static int exec_for(struct jrt *rt, struct jscope *s, const struct jnode *n)
{
    struct jinja_value seqv;
    struct jv_list *items;
    int rc = eval(rt, s, n->b, &seqv);
    if (rc < 0)
        return rc;
    rt->line = n->line;
    if ((rc = jrt_iterate(rt, seqv, &items)) < 0)
        return rc;
    if (n->e) { /* for x in seq if cond: filter first */
        struct jinja_value f = jv_list_new(rt->a, items->n);
        for (size_t i = 0; i < items->n; i++) {
            struct jscope fs = {.parent = s};
            struct jinja_value c;
            if ((rc = check_time(rt)) < 0 || (rc = assign(rt, &fs, n->a, items->v[i])) < 0 ||
                (rc = eval(rt, &fs, n->e, &c)) < 0)
                return rc;
            if (jv_truthy(c))
                jv_list_push(rt->a, f.u.list, items->v[i]);
        }
        items = f.u.list;
    }
    struct jloop *loop = ja_alloc(rt->a, sizeof(*loop));
    memset(loop, 0, sizeof(*loop));
    loop->items = items;
    loop->depth0 = 0; /* depth counts recursive loops only, which are unsupported */
    loop->self.kind = JV_LOOP;
    loop->self.u.loop = loop;
    for (size_t i = 0; i < items->n; i++) {
        struct jscope it = {.parent = s};
        loop->i = i;
        if ((rc = check_time(rt)) < 0 || (rc = assign(rt, &it, n->a, items->v[i])) < 0)
            return rc;
        scope_set(rt, &it, rt->t->name_loop, loop->self);
        rc = exec_body(rt, &it, n->c);
        if (rc < 0)
            return rc;
        if (rc == EXEC_BREAK)
            break;
        if (rt->a->total > RENDER_ARENA_MAX)
            return jrt_fail(rt, "render uses too much memory");
    }
    if (items->n == 0 && n->d) {
        struct jscope es = {.parent = s};
        rc = exec_body(rt, &es, n->d);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int exec_node(struct jrt *rt, struct jscope *s, const struct jnode *n)
{
    struct jinja_value v;
    int rc;
    rt->line = n->line;
    if ((++rt->tick & 255) == 0 && (rc = check_time(rt)) < 0)
        return rc;
    switch (n->type) {
    case JN_TEXT:
        buf_append(rt->out, n->val.u.s.s, n->val.u.s.n);
        break;
    case JN_OUTPUT:
        if ((rc = eval(rt, s, n->a, &v)) < 0 || (rc = check_printable(rt, v)) < 0)
            return rc;
        jv_to_str(rt->out, v);
        break;
    case JN_IF:
        for (;;) {
            if ((rc = eval(rt, s, n->a, &v)) < 0)
                return rc;
            if (jv_truthy(v))
                return exec_body(rt, s, n->b);
            if (!n->c)
                return EXEC_OK;
            if (n->c->type != JN_IF)
                return exec_body(rt, s, n->c);
            n = n->c;
        }
    case JN_FOR:
        return exec_for(rt, s, n);
    case JN_SET:
        if (n->c) {
            if ((rc = capture_body(rt, s, n->c, &v)) < 0)
                return rc;
        } else if ((rc = eval(rt, s, n->b, &v)) < 0) {
            return rc;
        }
        rt->line = n->line;
        return assign(rt, s, n->a, v);
    case JN_MACRO:
        v.kind = JV_MACRO;
        v.flags = 0;
        v.u.macro = n;
        scope_set(rt, s, n->name, v);
        break;
    case JN_BREAK:
        return EXEC_BREAK;
    case JN_CONTINUE:
        return EXEC_CONTINUE;
    case JN_BODY:
        return exec_body(rt, s, n);
    case JN_WITH: { /* values are computed in the outer scope, then bound in a child one */
        struct jscope inner = {.parent = s};
        struct jinja_value *vals = ja_alloc(rt->a, (n->n_kw + 1) * sizeof(*vals));
        for (size_t i = 0; i < n->n_kw; i++)
            if ((rc = eval(rt, s, n->kw[i], &vals[i])) < 0)
                return rc;
        for (size_t i = 0; i < n->n_kids; i++)
            scope_set(rt, &inner, n->kids[i]->name, vals[i]);
        return exec_body(rt, &inner, n->c);
    }
    case JN_CALLBLOCK: {
        struct jinja_value fn;
        struct jargs args;
        if ((rc = eval(rt, s, n->a->a, &fn)) < 0 || (rc = eval_args(rt, s, n->a, &args)) < 0)
            return rc;
        rt->line = n->line;
        if (fn.kind != JV_MACRO)
            return fn.kind == JV_UNDEF ? jrt_fail_undefined(rt, fn)
                                       : jrt_fail(rt, "{%% call %%} needs a macro");
        struct jcaller *c = ja_alloc(rt->a, sizeof(*c));
        c->block = n;
        c->scope = s;
        c->active = true;
        rc = call_macro(rt, fn.u.macro, &args, c, &v);
        c->active = false;
        if (rc < 0)
            return rc;
        jv_to_str(rt->out, v);
        break;
    }
    case JN_FILTERBLOCK: {
        struct jscope inner = {.parent = s};
        struct jinja_value body;
        rc = capture_body(rt, &inner, n->c, &body);
        if (rc >= 0) {
            struct jinja_value prev = rt->block_val;
            rt->block_val = body;
            rc = eval(rt, s, n->a, &v);
            rt->block_val = prev;
            if (rc >= 0 && (rc = check_printable(rt, v)) >= 0)
                jv_to_str(rt->out, v);
        }
        if (rc < 0)
            return rc;
        break;
    }
    case JN_SCOPE: {
        struct jscope inner = {.parent = s};
        return exec_body(rt, &inner, n->a);
    }
    default:
        return jrt_fail(rt, "internal error: bad statement node %d", n->type);
    }
    if (rt->out->len > RENDER_OUT_MAX) {
        jrt_fail(rt, "rendered prompt too large");
        return ERR_TOOBIG;
    }
    return EXEC_OK;
}

static int exec_body(struct jrt *rt, struct jscope *s, const struct jnode *body)
{
    for (size_t i = 0; i < body->n_kids; i++) {
        int rc = exec_node(rt, s, body->kids[i]);
        if (rc != EXEC_OK)
            return rc;
    }
    return EXEC_OK;
}

int jinja_eval_render(const struct jinja_template *t, struct jarena *a, const struct jv_dict *vars,
                      struct buf *out, struct jinja_error *err)
{
    struct jscope root = {0};
    struct jrt rt = {.a = a,
                     .t = t,
                     .vars = vars,
                     .root = &root,
                     .out = out,
                     .err = err,
                     .line = 1,
                     .t_end_ns = clock_now_ns() + (uint64_t)RENDER_TIME_MAX_MS * 1000000u};
    err->line = 0;
    err->msg[0] = 0;
    int rc = exec_body(&rt, &root, t->root);
    if (rc < 0 && !err->msg[0])
        jrt_fail(&rt, "%s", err_str(rc));
    return rc < 0 ? rc : 0;
}
