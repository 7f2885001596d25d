/* jinja builtins: the name tables (filters, tests, globals, methods), the tests (`is ...`), the
 * globals HF registers (raise_exception, strftime_now, namespace, range, dict) and the Python
 * methods of str, dict, list and the loop object that templates call. Filters: jinja_filters.c. */
#define _POSIX_C_SOURCE 200809L /* localtime_r */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "common/err.h"
#include "jinja_builtins.h"

static const char *const NAMES[B_COUNT] = {
#define X(id, name) [id] = name,
    BUILTIN_TABLE(X)
#undef X
};

static int find_in(const char *name, int lo, int hi)
{
    for (int i = lo + 1; i < hi; i++)
        if (NAMES[i] && !strcmp(NAMES[i], name))
            return i;
    return -1;
}

int jinja_filter_id(const char *name)
{
    if (!strcmp(name, "d"))
        return F_DEFAULT;
    if (!strcmp(name, "e"))
        return F_ESCAPE;
    return find_in(name, B_FILTERS_BEGIN, B_FILTERS_END);
}

int jinja_test_id(const char *name)
{
    static const struct {
        const char *alias;
        int id;
    } aliases[] = {{"==", T_EQ}, {"equalto", T_EQ},     {"!=", T_NE},
                   {"<", T_LT},  {"lessthan", T_LT},    {"<=", T_LE},
                   {">", T_GT},  {"greaterthan", T_GT}, {">=", T_GE}};
    for (size_t i = 0; i < ARRAY_LEN(aliases); i++)
        if (!strcmp(name, aliases[i].alias))
            return aliases[i].id;
    return find_in(name, B_TESTS_BEGIN, B_TESTS_END);
}

int jinja_global_id(const char *name)
{
    return find_in(name, B_GLOBALS_BEGIN, B_GLOBALS_END);
}

int jinja_method_id(const char *name)
{
    return find_in(name, B_METHODS_BEGIN, B_METHODS_END);
}

const char *jinja_builtin_name(int id)
{
    return id >= 0 && id < B_COUNT && NAMES[id] ? NAMES[id] : "?";
}

const struct jinja_value *jargs_get(const struct jargs *a, size_t pos, const char *name)
{
    if (pos < a->n_pos)
        return &a->pos[pos];
    for (size_t i = 0; name && i < a->n_kw; i++)
        if (!strcmp(a->kw_names[i], name))
            return &a->kw[i];
    return NULL;
}

// ---- tests ----

static bool num(struct jinja_value v)
{
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}

static bool any_num(struct jinja_value v)
{
    return num(v) || v.kind == JV_BIGINT;
}

int jinja_apply_test(struct jrt *rt, int id, struct jinja_value v, const struct jargs *args,
                     bool *out)
{
    const struct jinja_value *arg = jargs_get(args, 0, NULL);
    int rc;
    switch (id) {
    case T_DEFINED:
        *out = v.kind != JV_UNDEF;
        return 0;
    case T_UNDEFINED:
        *out = v.kind == JV_UNDEF;
        return 0;
    case T_NONE:
        *out = v.kind == JV_NONE;
        return 0;
    case T_STRING:
        *out = v.kind == JV_STR;
        return 0;
    case T_NUMBER:
        *out = any_num(v);
        return 0;
    case T_INTEGER:
        *out = v.kind == JV_INT || v.kind == JV_BIGINT;
        return 0;
    case T_FLOAT:
        *out = v.kind == JV_FLOAT;
        return 0;
    case T_BOOLEAN:
        *out = v.kind == JV_BOOL;
        return 0;
    case T_TRUE:
        *out = v.kind == JV_BOOL && v.u.b;
        return 0;
    case T_FALSE:
        *out = v.kind == JV_BOOL && !v.u.b;
        return 0;
    case T_MAPPING:
        *out = v.kind == JV_DICT;
        return 0;
    case T_ITERABLE:
        *out = v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF;
        return 0;
    case T_SEQUENCE:
        *out = v.kind == JV_STR || (v.kind == JV_LIST && !(v.flags & JV_F_LAZY)) ||
               v.kind == JV_DICT || v.kind == JV_UNDEF;
        return 0;
    case T_CALLABLE: /* Undefined has __call__ (it raises), so jinja2 calls it callable */
        *out = v.kind == JV_MACRO || v.kind == JV_FUNC || v.kind == JV_UNDEF;
        return 0;
    case T_ESCAPED:
        *out = v.kind == JV_STR && (v.flags & JV_F_SAFE);
        return 0;
    case T_LOWER:
    case T_UPPER: { /* str(value).islower() / .isupper(): a cased char and none of the other */
        struct jinja_value sv = jv_stringify(jrt_arena(rt), v);
        bool want = false, other = false;
        for (size_t i = 0; i < sv.u.s.n; i = utf8_next(sv.u.s.s, sv.u.s.n, i)) {
            utf8proc_category_t c =
                utf8proc_category((utf8proc_int32_t)utf8_decode(sv.u.s.s, sv.u.s.n, i));
            bool lo = c == UTF8PROC_CATEGORY_LL;
            bool up = c == UTF8PROC_CATEGORY_LU, title = c == UTF8PROC_CATEGORY_LT;
            if (id == T_LOWER ? lo : up)
                want = true;
            else if (lo || up || title)
                other = true;
        }
        *out = want && !other;
        return 0;
    }
    case T_ODD:
    case T_EVEN:
    case T_DIVISIBLEBY: { /* value % 2 == 1, value % 2 == 0, value % num == 0 */
        struct jinja_value m, want = jv_int(id == T_ODD ? 1 : 0);
        struct jinja_value d = id == T_DIVISIBLEBY ? (arg ? *arg : jv_undef("num")) : jv_int(2);
        if ((rc = jrt_binop(rt, '%', v, d, &m)) < 0)
            return rc;
        *out = jv_equal(m, want);
        return 0;
    }
    case T_SAMEAS:
        if (!arg)
            return jrt_fail(rt, "test 'sameas' needs an argument");
        /* identity: None/bool singletons, or the same container */
        if (v.kind == JV_NONE || v.kind == JV_BOOL || v.kind == JV_UNDEF)
            *out = v.kind == arg->kind && (v.kind != JV_BOOL || v.u.b == arg->u.b);
        else if (v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_NS)
            *out = v.kind == arg->kind && v.u.list == arg->u.list;
        else
            *out = jv_equal(v, *arg) && v.kind == arg->kind;
        return 0;
    case T_EQ:
    case T_NE:
        if (!arg)
            return jrt_fail(rt, "test needs an argument");
        *out = jv_equal(v, *arg) == (id == T_EQ);
        return 0;
    case T_LT:
    case T_LE:
    case T_GT:
    case T_GE: {
        if (!arg)
            return jrt_fail(rt, "test needs an argument");
        if (!((num(v) && num(*arg)) || (v.kind == JV_STR && arg->kind == JV_STR)))
            return jrt_fail(rt, "comparison not supported between '%s' and '%s'", jv_type_name(v),
                            jv_type_name(*arg));
        double d;
        if (num(v)) {
            double x = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
            double y = arg->kind == JV_FLOAT ? arg->u.f
                       : arg->kind == JV_INT ? (double)arg->u.i
                                             : arg->u.b;
            d = x - y;
        } else {
            size_t n = v.u.s.n < arg->u.s.n ? v.u.s.n : arg->u.s.n;
            int c = n ? memcmp(v.u.s.s, arg->u.s.s, n) : 0;
            d = c ? c : (double)v.u.s.n - (double)arg->u.s.n;
        }
        *out = id == T_LT ? d < 0 : id == T_LE ? d <= 0 : id == T_GT ? d > 0 : d >= 0;
        return 0;
    }
    case T_IN:
        if (!arg)
            return jrt_fail(rt, "test 'in' needs an argument");
        rc = jrt_contains(rt, *arg, v, out);
        return rc;
    default:
        return jrt_fail(rt, "unsupported test '%s'", jinja_builtin_name(id));
    }
}

// ---- globals ----

static int g_namespace(struct jrt *rt, const struct jargs *args, struct jinja_value *out)
{
    struct jarena *a = jrt_arena(rt);
    *out = jv_dict_new(a, args->n_kw + 2);
    out->kind = JV_NS;
    for (size_t i = 0; i < args->n_pos; i++) {
        if (args->pos[i].kind != JV_DICT)
            return jrt_fail(rt, "namespace() positional arguments must be mappings");
        const struct jv_dict *d = args->pos[i].u.dict;
        for (size_t k = 0; k < d->n; k++)
            jv_dict_set(a, out->u.dict, d->k[k], d->v[k]);
    }
    for (size_t i = 0; i < args->n_kw; i++)
        jv_dict_set(a, out->u.dict, jv_str(args->kw_names[i], strlen(args->kw_names[i])),
                    args->kw[i]);
    return 0;
}

static int g_range(struct jrt *rt, const struct jargs *args, struct jinja_value *out)
{
    int64_t v[3] = {0, 0, 1};
    if (args->n_pos < 1 || args->n_pos > 3 || args->n_kw)
        return jrt_fail(rt, "range expected 1 to 3 integer arguments");
    for (size_t i = 0; i < args->n_pos; i++) {
        if (args->pos[i].kind != JV_INT && args->pos[i].kind != JV_BOOL)
            return jrt_fail(rt, "'%s' object cannot be interpreted as an integer",
                            jv_type_name(args->pos[i]));
    }
    if (args->n_pos == 1) {
        v[1] = args->pos[0].u.i;
    } else {
        v[0] = args->pos[0].u.i;
        v[1] = args->pos[1].u.i;
        if (args->n_pos == 3)
            v[2] = args->pos[2].u.i;
    }
    if (v[2] == 0)
        return jrt_fail(rt, "range() arg 3 must not be zero");
    /* in unsigned arithmetic: the span and the step of any int64 bounds fit in a uint64_t */
    const bool up = v[2] > 0;
    const uint64_t span = up ? (v[1] > v[0] ? (uint64_t)v[1] - (uint64_t)v[0] : 0)
                             : (v[0] > v[1] ? (uint64_t)v[0] - (uint64_t)v[1] : 0);
    const uint64_t step = up ? (uint64_t)v[2] : (uint64_t)0 - (uint64_t)v[2];
    const uint64_t ucount = span / step + (span % step != 0);
    if (ucount > 100000) /* the sandbox's MAX_RANGE */
        return jrt_fail(rt,
                        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    const int64_t count = (int64_t)ucount;
    *out = jv_list_new(jrt_arena(rt), (size_t)count);
    for (int64_t i = 0; i < count; i++)
        jv_list_push(jrt_arena(rt), out->u.list, jv_int(v[0] + i * v[2]));
    return 0;
}

static int g_strftime_now(struct jrt *rt, const struct jargs *args, struct jinja_value *out)
{
    const struct jinja_value *fmt = jargs_get(args, 0, "format");
    if (!fmt || fmt->kind != JV_STR)
        return jrt_fail(rt, "strftime_now needs a format string");
    char f[256], buf[512];
    if (fmt->u.s.n >= sizeof(f))
        return jrt_fail(rt, "strftime_now format too long");
    memcpy(f, fmt->u.s.s, fmt->u.s.n);
    f[fmt->u.s.n] = 0;
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    size_t n = strftime(buf, sizeof(buf), f, &tm); /* the template's format, like Python's */
#pragma GCC diagnostic pop
    *out = jv_strdup(jrt_arena(rt), buf, n);
    return 0;
}

// ---- methods ----

static bool method_ok(int id, struct jinja_value obj)
{
    switch (obj.kind) {
    case JV_STR:
        return id >= M_STR_BEGIN && id < M_STR_END;
    case JV_DICT:
        return id >= M_DICT_BEGIN && id < M_DICT_END;
    case JV_LIST:
        return !(obj.flags & JV_F_LAZY) && (id == M_INDEX || id == M_COUNT);
    case JV_LOOP:
        return id == M_CYCLE || id == M_CHANGED;
    default:
        return false;
    }
}

bool jinja_method_bind(struct jrt *rt, struct jinja_value obj, const char *name,
                       struct jinja_value *out)
{
    int id = jinja_method_id(name);
    if (id < 0 || !method_ok(id, obj))
        return false;
    struct jinja_value *self = ja_alloc(jrt_arena(rt), sizeof(*self));
    *self = obj;
    out->kind = JV_FUNC;
    out->flags = 0;
    out->fn = (uint16_t)id;
    out->u.self = self;
    return true;
}

static int need_str(struct jrt *rt, const struct jinja_value *v, const char *what)
{
    if (!v || v->kind != JV_STR)
        return jrt_fail(rt, "%s must be a str, not %s", what, v ? jv_type_name(*v) : "nothing");
    return 0;
}

static bool affix_match(struct jinja_value s, struct jinja_value a, bool end)
{
    if (a.u.s.n > s.u.s.n)
        return false;
    const char *p = end ? s.u.s.s + s.u.s.n - a.u.s.n : s.u.s.s;
    return a.u.s.n == 0 || memcmp(p, a.u.s.s, a.u.s.n) == 0;
}

static int str_method(struct jrt *rt, int id, struct jinja_value s, const struct jargs *args,
                      struct jinja_value *out)
{
    struct jarena *a = jrt_arena(rt);
    const struct jinja_value *a0 = jargs_get(args, 0, NULL);
    const struct jinja_value *a1 = jargs_get(args, 1, NULL);
    switch (id) {
    case M_STARTSWITH:
    case M_ENDSWITH: {
        if (!a0 || args->n_pos > 1)
            return jrt_fail(rt, "%s() takes one argument here", jinja_builtin_name(id));
        bool end = id == M_ENDSWITH, r = false;
        if (a0->kind == JV_LIST) {
            for (size_t i = 0; i < a0->u.list->n && !r; i++) {
                if (need_str(rt, &a0->u.list->v[i], "prefix") < 0)
                    return ERR_INVAL;
                r = affix_match(s, a0->u.list->v[i], end);
            }
        } else {
            if (need_str(rt, a0, "prefix") < 0)
                return ERR_INVAL;
            r = affix_match(s, *a0, end);
        }
        *out = jv_bool(r);
        return 0;
    }
    case M_SPLIT:
    case M_RSPLIT: {
        const struct jinja_value *sep = jargs_get(args, 0, "sep");
        const struct jinja_value *ms = jargs_get(args, 1, "maxsplit");
        if (sep && sep->kind == JV_NONE)
            sep = NULL;
        if (sep && need_str(rt, sep, "separator") < 0)
            return ERR_INVAL;
        if (sep && sep->u.s.n == 0)
            return jrt_fail(rt, "empty separator");
        int64_t maxsplit = -1;
        if (ms) {
            if (ms->kind != JV_INT)
                return jrt_fail(rt, "maxsplit must be an int");
            maxsplit = ms->u.i;
        }
        *out = py_split(a, s, sep, maxsplit, id == M_RSPLIT);
        return 0;
    }
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP:
        if (a0 && a0->kind == JV_NONE)
            a0 = NULL;
        if (a0 && need_str(rt, a0, "chars") < 0)
            return ERR_INVAL;
        *out = py_strip(s, a0,
                        id == M_STRIP    ? PY_STRIP_BOTH
                        : id == M_LSTRIP ? PY_STRIP_LEFT
                                         : PY_STRIP_RIGHT);
        return 0;
    case M_REPLACE: {
        const struct jinja_value *a2 = jargs_get(args, 2, "count");
        if (need_str(rt, a0, "old") < 0 || need_str(rt, a1, "new") < 0)
            return ERR_INVAL;
        *out = py_replace(a, s, *a0, *a1, a2 && a2->kind == JV_INT ? a2->u.i : -1);
        out->flags = s.flags & JV_F_SAFE;
        return 0;
    }
    case M_UPPER:
    case M_LOWER:
    case M_CAPITALIZE:
        *out = py_case(a, s, id == M_UPPER ? 'u' : id == M_LOWER ? 'l' : 'c');
        if (id == M_CAPITALIZE && out->u.s.n) { /* rest lower */
            size_t j = utf8_next(out->u.s.s, out->u.s.n, 0);
            struct jinja_value rest = py_case(a,
                                              jv_str(s.u.s.s + utf8_next(s.u.s.s, s.u.s.n, 0),
                                                     s.u.s.n - utf8_next(s.u.s.s, s.u.s.n, 0)),
                                              'l');
            struct buf b = {0};
            buf_append(&b, out->u.s.s, j);
            buf_append(&b, rest.u.s.s, rest.u.s.n);
            *out = jv_strdup(a, b.data, b.len);
            out->flags = s.flags & JV_F_SAFE;
            buf_deinit(&b);
        }
        return 0;
    case M_FIND:
    case M_RFIND:
        if (need_str(rt, a0, "sub") < 0)
            return ERR_INVAL;
        *out = jv_int(py_find(s, *a0, id == M_RFIND));
        return 0;
    case M_COUNT:
        if (need_str(rt, a0, "sub") < 0)
            return ERR_INVAL;
        *out = jv_int(py_count(s, *a0));
        return 0;
    case M_SPLITLINES: {
        const struct jinja_value *k = jargs_get(args, 0, "keepends");
        *out = py_splitlines(a, s, k && jv_truthy(*k));
        return 0;
    }
    case M_JOIN: {
        struct jv_list *items;
        if (!a0)
            return jrt_fail(rt, "join() takes exactly one argument");
        int rc = jrt_iterate(rt, *a0, &items);
        if (rc < 0)
            return rc;
        struct buf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            if (items->v[i].kind != JV_STR) {
                buf_deinit(&b);
                return jrt_fail(rt, "sequence item %zu: expected str instance, %s found", i,
                                jv_type_name(items->v[i]));
            }
            if (i)
                buf_append(&b, s.u.s.s, s.u.s.n);
            buf_append(&b, items->v[i].u.s.s, items->v[i].u.s.n);
        }
        *out = jv_strdup(a, b.data ? b.data : "", b.len);
        buf_deinit(&b);
        return 0;
    }
    case M_ISDIGIT:
    case M_ISALPHA:
    case M_ISSPACE: {
        bool r = s.u.s.n > 0;
        for (size_t i = 0; i < s.u.s.n && r; i = utf8_next(s.u.s.s, s.u.s.n, i)) {
            uint32_t cp = utf8_decode(s.u.s.s, s.u.s.n, i);
            if (id == M_ISSPACE)
                r = py_isspace(cp);
            else if (id == M_ISDIGIT)
                r = cp >= '0' && cp <= '9';
            else
                r = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp >= 0x80;
        }
        *out = jv_bool(r);
        return 0;
    }
    default:
        return jrt_fail(rt, "'str' object has no method '%s'", jinja_builtin_name(id));
    }
}

static int dict_method(struct jrt *rt, int id, struct jinja_value d, const struct jargs *args,
                       struct jinja_value *out)
{
    struct jarena *a = jrt_arena(rt);
    const struct jv_dict *dd = d.u.dict;
    switch (id) {
    case M_ITEMS:
        *out = jv_list_new(a, dd->n);
        for (size_t i = 0; i < dd->n; i++) {
            struct jinja_value t = jv_list_new(a, 2);
            t.flags = JV_F_TUPLE;
            jv_list_push(a, t.u.list, dd->k[i]);
            jv_list_push(a, t.u.list, dd->v[i]);
            jv_list_push(a, out->u.list, t);
        }
        out->flags = JV_F_ITEMS;
        return 0;
    case M_KEYS:
    case M_VALUES:
        *out = jv_list_new(a, dd->n);
        out->flags = id == M_KEYS ? JV_F_KEYS : JV_F_VALUES;
        for (size_t i = 0; i < dd->n; i++)
            jv_list_push(a, out->u.list, id == M_KEYS ? dd->k[i] : dd->v[i]);
        return 0;
    case M_GET: {
        const struct jinja_value *k = jargs_get(args, 0, NULL);
        const struct jinja_value *def = jargs_get(args, 1, NULL);
        if (!k)
            return jrt_fail(rt, "get expected at least 1 argument");
        struct jinja_value *v = jv_dict_find(dd, *k);
        *out = v ? *v : def ? *def : jv_none();
        return 0;
    }
    default:
        return jrt_fail(rt, "'dict' object has no method '%s'", jinja_builtin_name(id));
    }
}

int jinja_call_builtin(struct jrt *rt, int id, const struct jinja_value *self,
                       const struct jargs *args, struct jinja_value *out)
{
    if (!self) {
        switch (id) {
        case G_RAISE_EXCEPTION: {
            const struct jinja_value *m = jargs_get(args, 0, NULL);
            struct buf b = {0};
            if (m)
                jv_to_str(&b, *m);
            int rc = jrt_fail(rt, "%s", b.data ? b.data : "");
            buf_deinit(&b);
            return rc;
        }
        case G_NAMESPACE:
            return g_namespace(rt, args, out);
        case G_RANGE:
            return g_range(rt, args, out);
        case G_DICT: {
            struct jargs kw = *args;
            int rc = g_namespace(rt, &kw, out);
            out->kind = JV_DICT;
            return rc;
        }
        case G_STRFTIME_NOW:
            return g_strftime_now(rt, args, out);
        default:
            return jrt_fail(rt, "'%s' is not callable", jinja_builtin_name(id));
        }
    }
    switch (self->kind) {
    case JV_STR:
        return str_method(rt, id, *self, args, out);
    case JV_DICT:
        return dict_method(rt, id, *self, args, out);
    case JV_LIST: {
        const struct jinja_value *x = jargs_get(args, 0, NULL);
        if (!x)
            return jrt_fail(rt, "%s() takes exactly one argument", jinja_builtin_name(id));
        int64_t c = 0, at = -1;
        for (size_t i = 0; i < self->u.list->n; i++)
            if (jv_equal(self->u.list->v[i], *x)) {
                c++;
                if (at < 0)
                    at = (int64_t)i;
            }
        if (id == M_INDEX && at < 0)
            return jrt_fail(rt, "value is not in list");
        *out = jv_int(id == M_COUNT ? c : at);
        return 0;
    }
    case JV_LOOP: {
        struct jloop *l = self->u.loop;
        if (id == M_CYCLE) {
            if (args->n_pos == 0)
                return jrt_fail(rt, "no items for cycling given");
            *out = args->pos[l->i % args->n_pos];
            return 0;
        }
        /* changed(*values) */
        struct jinja_value cur = jv_list_new(jrt_arena(rt), args->n_pos);
        for (size_t i = 0; i < args->n_pos; i++)
            jv_list_push(jrt_arena(rt), cur.u.list, args->pos[i]);
        bool changed = !l->changed_set || !jv_equal(l->last_changed, cur);
        l->last_changed = cur;
        l->changed_set = true;
        *out = jv_bool(changed);
        return 0;
    }
    default:
        return jrt_fail(rt, "'%s' object has no method '%s'", jv_type_name(*self),
                        jinja_builtin_name(id));
    }
}
