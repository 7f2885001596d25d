/* jinja filters: the jinja2 builtin filters chat templates use, with autoescape off, plus HF's
 * tojson (json.dumps with ensure_ascii=False, indent, separators, sort_keys). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "jinja_builtins.h"

static struct jinja_value safe_str(struct jarena *a, struct jinja_value v)
{
    struct jinja_value s = jv_stringify(a, v);
    s.flags |= JV_F_SAFE;
    return s;
}

static int f_length(struct jrt *rt, struct jinja_value v, struct jinja_value *out)
{
    switch (v.kind) {
    case JV_STR:
        *out = jv_int((int64_t)utf8_len(v.u.s.s, v.u.s.n));
        return 0;
    case JV_LIST:
        if (v.flags & JV_F_GEN)
            return jrt_fail(rt, "object of type 'generator' has no len()");
        *out = jv_int((int64_t)v.u.list->n);
        return 0;
    case JV_DICT:
        *out = jv_int((int64_t)v.u.dict->n);
        return 0;
    case JV_UNDEF:
        *out = jv_int(0);
        return 0;
    default:
        return jrt_fail(rt, "object of type '%s' has no len()", jv_type_name(v));
    }
}

static int f_tojson(struct jrt *rt, struct jinja_value v, const struct jargs *args,
                    struct jinja_value *out)
{
    struct tojson_opts o = {.item_sep = ", ", .item_sep_n = 2, .key_sep = ": ", .key_sep_n = 2};
    const struct jinja_value *ea = jargs_get(args, 0, "ensure_ascii");
    const struct jinja_value *ind = jargs_get(args, 1, "indent");
    const struct jinja_value *sep = jargs_get(args, 2, "separators");
    const struct jinja_value *sk = jargs_get(args, 3, "sort_keys");
    char spaces[64];
    o.ensure_ascii = ea && jv_truthy(*ea);
    o.sort_keys = sk && jv_truthy(*sk);
    if (ind && ind->kind != JV_NONE) {
        if (ind->kind == JV_INT) {
            int64_t k = ind->u.i < 0 ? 0 : ind->u.i;
            if (k >= (int64_t)sizeof(spaces))
                return jrt_fail(rt, "tojson: indent too large");
            memset(spaces, ' ', (size_t)k);
            o.indent = spaces;
            o.indent_n = (size_t)k;
        } else if (ind->kind == JV_STR) {
            o.indent = ind->u.s.s;
            o.indent_n = ind->u.s.n;
        } else {
            return jrt_fail(rt, "tojson: indent must be an int or a str");
        }
        o.item_sep = ",";
        o.item_sep_n = 1;
    }
    if (sep && sep->kind != JV_NONE) {
        if (sep->kind != JV_LIST || sep->u.list->n != 2 || sep->u.list->v[0].kind != JV_STR ||
            sep->u.list->v[1].kind != JV_STR)
            return jrt_fail(rt, "tojson: separators must be a pair of strings");
        o.item_sep = sep->u.list->v[0].u.s.s;
        o.item_sep_n = sep->u.list->v[0].u.s.n;
        o.key_sep = sep->u.list->v[1].u.s.s;
        o.key_sep_n = sep->u.list->v[1].u.s.n;
    }
    struct buf b = {0};
    char msg[200];
    int rc = jv_tojson(&b, v, &o, msg, sizeof(msg));
    if (rc == 0)
        *out = jv_strdup(jrt_arena(rt), b.data ? b.data : "", b.len);
    buf_deinit(&b);
    if (rc == ERR_INVAL)
        return jrt_fail(rt, "%s", msg);
    return rc;
}

/* Python int(str) / float(str): surrounding whitespace allowed, underscores between digits. */
static bool parse_int(struct jinja_value s, int64_t *out)
{
    char tmp[80];
    struct jinja_value t = py_strip(s, NULL, PY_STRIP_BOTH);
    size_t m = 0;
    for (size_t i = 0; i < t.u.s.n; i++) {
        char c = t.u.s.s[i];
        if (c == '_' && i > 0 && i + 1 < t.u.s.n)
            continue;
        if (m + 1 >= sizeof(tmp))
            return false;
        tmp[m++] = c;
    }
    tmp[m] = 0;
    if (m == 0)
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(tmp, &end, 10);
    if (*end || errno)
        return false;
    *out = v;
    return true;
}

static bool parse_float(struct jinja_value s, double *out)
{
    char tmp[80];
    struct jinja_value t = py_strip(s, NULL, PY_STRIP_BOTH);
    if (t.u.s.n == 0 || t.u.s.n >= sizeof(tmp))
        return false;
    memcpy(tmp, t.u.s.s, t.u.s.n);
    tmp[t.u.s.n] = 0;
    char *end;
    double v = strtod(tmp, &end);
    if (*end)
        return false;
    *out = v;
    return true;
}

static int f_int(struct jrt *rt, struct jinja_value v, const struct jargs *args,
                 struct jinja_value *out)
{
    if (v.kind == JV_UNDEF) /* int(Undefined) raises UndefinedError */
        return jrt_fail_undefined(rt, v);
    const struct jinja_value *def = jargs_get(args, 0, "default");
    int64_t i;
    double f;
    switch (v.kind) {
    case JV_INT:
    case JV_BIGINT:
        *out = v;
        return 0;
    case JV_BOOL:
        *out = jv_int(v.u.b);
        return 0;
    case JV_FLOAT:
        if (isfinite(v.u.f)) {
            if (!(fabs(v.u.f) < 9.2e18)) /* Python gives a big int: not representable here */
                return jrt_fail(rt, "unsupported construct: int of a float past 64 bits");
            *out = jv_int((int64_t)v.u.f);
            return 0;
        }
        break;
    case JV_STR:
        if (parse_int(v, &i)) {
            *out = jv_int(i);
            return 0;
        }
        if (parse_float(v, &f) && isfinite(f)) {
            if (!(fabs(f) < 9.2e18))
                return jrt_fail(rt, "unsupported construct: int of a float past 64 bits");
            *out = jv_int((int64_t)f);
            return 0;
        }
        break;
    default:
        break;
    }
    *out = def ? *def : jv_int(0);
    return 0;
}

static int f_float(struct jrt *rt, struct jinja_value v, const struct jargs *args,
                   struct jinja_value *out)
{
    if (v.kind == JV_UNDEF)
        return jrt_fail_undefined(rt, v);
    const struct jinja_value *def = jargs_get(args, 0, "default");
    double f;
    if (v.kind == JV_FLOAT) {
        *out = v;
    } else if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = jv_float(v.kind == JV_INT ? (double)v.u.i : v.u.b);
    } else if ((v.kind == JV_STR || v.kind == JV_BIGINT) && parse_float(v, &f)) {
        *out = jv_float(f);
    } else {
        *out = def ? *def : jv_float(0.0);
    }
    return 0;
}

static int f_round(struct jrt *rt, struct jinja_value v, const struct jargs *args,
                   struct jinja_value *out)
{
    const struct jinja_value *pv = jargs_get(args, 0, "precision");
    const struct jinja_value *mv = jargs_get(args, 1, "method");
    int64_t prec = pv && pv->kind == JV_INT ? pv->u.i : 0;
    int method = 'c';
    if (mv) {
        if (jv_is_str(*mv, "ceil"))
            method = 'C';
        else if (jv_is_str(*mv, "floor"))
            method = 'F';
        else if (!jv_is_str(*mv, "common"))
            return jrt_fail(rt, "method must be common, ceil or floor");
    }
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        int64_t i = v.kind == JV_INT ? v.u.i : v.u.b;
        if (method == 'c' && prec >= 0) { /* round(int, n) stays an int */
            *out = jv_int(i);
            return 0;
        }
        v = jv_float((double)i);
    }
    if (v.kind != JV_FLOAT)
        return jrt_fail(rt, "round() needs a number, not %s", jv_type_name(v));
    double x = v.u.f, r;
    if (method == 'c') {
        if (prec == 0) {
            r = nearbyint(x);
        } else {
            char tmp[400];
            snprintf(tmp, sizeof(tmp), "%.*f", (int)(prec > 300 ? 300 : prec < 0 ? 0 : prec), x);
            r = prec < 0 ? nearbyint(x / pow(10, (double)-prec)) * pow(10, (double)-prec)
                         : strtod(tmp, NULL);
        }
    } else {
        double m = pow(10, (double)prec);
        r = (method == 'C' ? ceil(x * m) : floor(x * m)) / m;
    }
    *out = jv_float(r);
    return 0;
}

/* n bytes in a buffer plus their copy into the arena would exceed the render's budget */
static bool join_too_big(struct jrt *rt, size_t n)
{
    size_t total = jrt_arena(rt)->total;
    return total > JINJA_ARENA_MAX || n > (JINJA_ARENA_MAX - total) / 2;
}

static int f_join(struct jrt *rt, struct jinja_value v, const struct jargs *args,
                  struct jinja_value *out)
{
    const struct jinja_value *d = jargs_get(args, 0, "d");
    const struct jinja_value *attr = jargs_get(args, 1, "attribute");
    struct jv_list *items;
    int rc = jrt_iterate(rt, v, &items);
    if (rc < 0)
        return rc;
    /* the separator as text, once: a non-string separator (say a tuple) would otherwise be
     * converted again for every item */
    struct buf sep = {0};
    if (d)
        jv_to_str(&sep, *d);
    if (join_too_big(rt, sep.len)) {
        buf_deinit(&sep);
        return jrt_fail(rt, "join result too large");
    }
    /* strings joined directly have a known total: refuse it before allocating anything */
    if (!attr && items->n) {
        size_t need = (items->n - 1) * sep.len;
        if (sep.len && need / sep.len != items->n - 1)
            need = SIZE_MAX;
        for (size_t i = 0; i < items->n && !join_too_big(rt, need); i++)
            need += items->v[i].kind == JV_STR ? items->v[i].u.s.n : 0;
        if (join_too_big(rt, need)) {
            buf_deinit(&sep);
            return jrt_fail(rt, "join result too large");
        }
    }
    struct buf b = {0};
    for (size_t i = 0; i < items->n; i++) {
        struct jinja_value it = items->v[i];
        if (attr && attr->kind == JV_STR &&
            (rc = jrt_getattr(rt, it, attr->u.s.s, attr->u.s.n, &it)) < 0) {
            buf_deinit(&b);
            buf_deinit(&sep);
            return rc;
        }
        /* the buffer and its copy into the arena must fit: check before growing (strings
         * have a known size; anything else is small or is checked right after) */
        size_t add = (i ? sep.len : 0) + (it.kind == JV_STR ? it.u.s.n : 0);
        if (join_too_big(rt, b.len + add)) {
            buf_deinit(&b);
            buf_deinit(&sep);
            return jrt_fail(rt, "join result too large");
        }
        if (i && sep.len)
            buf_append(&b, sep.data, sep.len);
        jv_to_str(&b, it);
        if (join_too_big(rt, b.len)) {
            buf_deinit(&b);
            buf_deinit(&sep);
            return jrt_fail(rt, "join result too large");
        }
    }
    buf_deinit(&sep);
    *out = jv_strdup(jrt_arena(rt), b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return 0;
}

/* getattr path "a.b.0" as jinja's make_attrgetter */
static int attr_path(struct jrt *rt, struct jinja_value v, struct jinja_value path,
                     struct jinja_value *out)
{
    const char *p = path.u.s.s;
    size_t n = path.u.s.n, st = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '.')
            continue;
        size_t len = i - st;
        bool digits = len > 0;
        for (size_t k = st; k < i; k++)
            digits = digits && p[k] >= '0' && p[k] <= '9';
        int rc = digits ? jrt_getitem(rt, v, jv_int(strtoll(p + st, NULL, 10)), &v)
                        : jrt_getitem(rt, v, jv_str(p + st, len), &v);
        if (rc < 0)
            return rc;
        st = i + 1;
    }
    *out = v;
    return 0;
}

/* select / reject / selectattr / rejectattr */
static int f_select(struct jrt *rt, int id, struct jinja_value v, const struct jargs *args,
                    struct jinja_value *out)
{
    bool by_attr = id == F_SELECTATTR || id == F_REJECTATTR;
    bool keep_if = id == F_SELECT || id == F_SELECTATTR;
    size_t k = 0;
    const struct jinja_value *attr = NULL;
    if (by_attr) {
        attr = jargs_get(args, k++, NULL);
        if (!attr || attr->kind != JV_STR)
            return jrt_fail(rt, "%s needs an attribute name", jinja_builtin_name(id));
    }
    const struct jinja_value *tname = jargs_get(args, k++, NULL);
    int test = -1;
    if (tname) {
        char tmp[64];
        if (tname->kind != JV_STR || tname->u.s.n >= sizeof(tmp))
            return jrt_fail(rt, "bad test name");
        memcpy(tmp, tname->u.s.s, tname->u.s.n);
        tmp[tname->u.s.n] = 0;
        if ((test = jinja_test_id(tmp)) < 0)
            return jrt_fail(rt, "unsupported test '%s'", tmp);
    }
    struct jargs targs = {0};
    if (args->n_pos > k) {
        targs.pos = args->pos + k;
        targs.n_pos = args->n_pos - k;
    }
    struct jv_list *items;
    int rc = jrt_iterate(rt, v, &items);
    if (rc < 0)
        return rc;
    *out = jv_list_new(jrt_arena(rt), items->n);
    for (size_t i = 0; i < items->n; i++) {
        struct jinja_value x = items->v[i];
        if (attr && (rc = attr_path(rt, x, *attr, &x)) < 0)
            return rc;
        bool r;
        if (test >= 0) {
            if ((rc = jinja_apply_test(rt, test, x, &targs, &r)) < 0)
                return rc;
        } else {
            r = jv_truthy(x);
        }
        if (r == keep_if)
            jv_list_push(jrt_arena(rt), out->u.list, items->v[i]);
    }
    out->flags = JV_F_GEN;
    return 0;
}

static int f_map(struct jrt *rt, struct jinja_value v, const struct jargs *args,
                 struct jinja_value *out)
{
    const struct jinja_value *attr = jargs_get(args, SIZE_MAX, "attribute");
    const struct jinja_value *def = jargs_get(args, SIZE_MAX, "default");
    struct jv_list *items;
    int rc = jrt_iterate(rt, v, &items);
    if (rc < 0)
        return rc;
    int filter = -1;
    struct jargs fargs = {0};
    if (!attr) {
        const struct jinja_value *fname = jargs_get(args, 0, NULL);
        char tmp[64];
        if (!fname || fname->kind != JV_STR || fname->u.s.n >= sizeof(tmp))
            return jrt_fail(rt, "map needs a filter name or attribute=");
        memcpy(tmp, fname->u.s.s, fname->u.s.n);
        tmp[fname->u.s.n] = 0;
        if ((filter = jinja_filter_id(tmp)) < 0)
            return jrt_fail(rt, "unsupported filter '%s'", tmp);
        fargs.pos = args->pos + 1;
        fargs.n_pos = args->n_pos - 1;
        fargs.kw = args->kw;
        fargs.kw_names = args->kw_names;
        fargs.n_kw = args->n_kw;
    } else if (attr->kind != JV_STR) {
        return jrt_fail(rt, "map attribute must be a string");
    }
    *out = jv_list_new(jrt_arena(rt), items->n);
    for (size_t i = 0; i < items->n; i++) {
        struct jinja_value x = items->v[i];
        if (attr) {
            if ((rc = attr_path(rt, x, *attr, &x)) < 0)
                return rc;
            if (x.kind == JV_UNDEF && def)
                x = *def;
        } else if ((rc = jinja_apply_filter(rt, filter, x, &fargs, &x)) < 0) {
            return rc;
        }
        jv_list_push(jrt_arena(rt), out->u.list, x);
    }
    out->flags = JV_F_GEN;
    return 0;
}

/* sort / unique / min / max: the key is the item (or its attribute path), lowercased for strings
 * unless case_sensitive, as jinja2's ignore_case. */
static int sort_key(struct jrt *rt, struct jinja_value v, const struct jinja_value *attr, bool cs,
                    struct jinja_value *key)
{
    int rc = 0;
    if (attr && attr->kind == JV_STR)
        rc = attr_path(rt, v, *attr, &v);
    else if (attr && (attr->kind == JV_INT))
        rc = jrt_getitem(rt, v, *attr, &v);
    if (rc < 0)
        return rc;
    *key = (!cs && v.kind == JV_STR) ? py_case(jrt_arena(rt), v, 'l') : v;
    return 0;
}

static int f_order(struct jrt *rt, int id, struct jinja_value v, const struct jargs *args,
                   struct jinja_value *out)
{
    bool is_sort = id == F_SORT;
    const struct jinja_value *rev = is_sort ? jargs_get(args, 0, "reverse") : NULL;
    const struct jinja_value *cs = jargs_get(args, is_sort ? 1 : 0, "case_sensitive");
    const struct jinja_value *attr = jargs_get(args, is_sort ? 2 : 1, "attribute");
    bool reverse = rev && jv_truthy(*rev), case_sens = cs && jv_truthy(*cs);
    struct jarena *a = jrt_arena(rt);
    struct jv_list *items;
    int rc = jrt_iterate(rt, v, &items);
    if (rc < 0)
        return rc;
    size_t n = items->n;
    struct jinja_value *keys = ja_alloc(a, (n + 1) * sizeof(*keys));
    for (size_t i = 0; i < n; i++)
        if ((rc = sort_key(rt, items->v[i], attr, case_sens, &keys[i])) < 0)
            return rc;
    if (id == F_UNIQUE) {
        *out = jv_list_new(a, n);
        for (size_t i = 0; i < n; i++) {
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++)
                seen = jv_equal(keys[j], keys[i]);
            if (!seen)
                jv_list_push(a, out->u.list, items->v[i]);
        }
        out->flags = JV_F_GEN;
        return 0;
    }
    if (id == F_MIN || id == F_MAX) {
        if (n == 0) {
            *out = jv_undef_hint("No aggregated item, sequence was empty.");
            return 0;
        }
        size_t best = 0;
        for (size_t i = 1; i < n; i++) {
            bool better;
            if ((rc = jrt_compare_order(rt, keys[i], keys[best], id == F_MIN ? JCMP_LT : JCMP_GT,
                                        &better)) < 0)
                return rc;
            if (better)
                best = i;
        }
        *out = items->v[best];
        return 0;
    }
    /* stable insertion sort on (key, item); reverse keeps equal items in input order */
    struct jinja_value *vals = ja_alloc(a, (n + 1) * sizeof(*vals));
    for (size_t i = 0; i < n; i++) {
        struct jinja_value k = keys[i], x = items->v[i];
        size_t j = i;
        while (j > 0) {
            bool move;
            if ((rc = jrt_compare_order(rt, k, keys[j - 1], reverse ? JCMP_GT : JCMP_LT, &move)) <
                0)
                return rc;
            if (!move)
                break;
            keys[j] = keys[j - 1];
            vals[j] = vals[j - 1];
            j--;
        }
        keys[j] = k;
        vals[j] = x;
    }
    *out = jv_list_new(a, n);
    for (size_t i = 0; i < n; i++)
        jv_list_push(a, out->u.list, vals[i]);
    return 0;
}

static int f_indent(struct jrt *rt, struct jinja_value v, const struct jargs *args,
                    struct jinja_value *out)
{
    const struct jinja_value *w = jargs_get(args, 0, "width");
    const struct jinja_value *first = jargs_get(args, 1, "first");
    const struct jinja_value *blank = jargs_get(args, 2, "blank");
    struct jarena *a = jrt_arena(rt);
    struct buf ind = {0}, b = {0};
    if (v.kind != JV_STR) /* jinja2 does s += "\n" */
        return jrt_fail(rt, "unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(v));
    if (w && w->kind == JV_STR)
        buf_append(&ind, w->u.s.s, w->u.s.n);
    else
        for (int64_t i = 0; i < (w && w->kind == JV_INT ? w->u.i : 4); i++)
            buf_putc(&ind, ' ');
    struct jinja_value s = jv_stringify(a, v);
    struct buf tmp = {0};
    buf_append(&tmp, s.u.s.s, s.u.s.n);
    buf_putc(&tmp, '\n');
    struct jinja_value lines = py_splitlines(a, jv_strdup(a, tmp.data, tmp.len), false);
    buf_deinit(&tmp);
    struct jv_list *l = lines.u.list;
    if (first && jv_truthy(*first))
        buf_append(&b, ind.data, ind.len);
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            buf_putc(&b, '\n');
        if (i && (l->v[i].u.s.n || (blank && jv_truthy(*blank))))
            buf_append(&b, ind.data, ind.len);
        buf_append(&b, l->v[i].u.s.s, l->v[i].u.s.n);
    }
    *out = jv_strdup(a, b.data ? b.data : "", b.len);
    out->flags = s.flags & JV_F_SAFE;
    buf_deinit(&b);
    buf_deinit(&ind);
    return 0;
}

int jinja_apply_filter(struct jrt *rt, int id, struct jinja_value v, const struct jargs *args,
                       struct jinja_value *out)
{
    struct jarena *a = jrt_arena(rt);
    const struct jinja_value *a0 = jargs_get(args, 0, NULL);
    struct jv_list *items;
    int rc;
    if (v.kind == JV_LIST && (v.flags & JV_F_GEN) &&
        (id == F_STRING || id == F_SAFE || id == F_TRIM || id == F_UPPER || id == F_LOWER ||
         id == F_CAPITALIZE || id == F_ESCAPE || id == F_REPLACE || id == F_INDENT))
        return jrt_fail(rt, "cannot turn a generator into text (jinja2 would show its address); "
                            "apply |list first");
    switch (id) {
    case F_LENGTH:
    case F_COUNT:
        return f_length(rt, v, out);
    case F_TOJSON:
        return f_tojson(rt, v, args, out);
    case F_SAFE:
        *out = safe_str(a, v);
        return 0;
    case F_STRING:
        *out = jv_stringify(a, v);
        return 0;
    case F_TRIM: {
        const struct jinja_value *chars = jargs_get(args, 0, "chars");
        if (chars && chars->kind == JV_NONE)
            chars = NULL;
        if (chars && chars->kind != JV_STR)
            return jrt_fail(rt, "trim chars must be a str");
        *out = py_strip(jv_stringify(a, v), chars, PY_STRIP_BOTH);
        return 0;
    }
    case F_UPPER:
    case F_LOWER:
        *out = py_case(a, jv_stringify(a, v), id == F_UPPER ? 'u' : 'l');
        return 0;
    case F_CAPITALIZE: {
        struct jinja_value s = jv_stringify(a, v);
        struct jargs none = {0};
        struct jinja_value self = s;
        return jinja_call_builtin(rt, M_CAPITALIZE, &self, &none, out);
    }
    case F_DEFAULT: {
        const struct jinja_value *def = jargs_get(args, 0, "default_value");
        const struct jinja_value *boolean = jargs_get(args, 1, "boolean");
        bool use = v.kind == JV_UNDEF || (boolean && jv_truthy(*boolean) && !jv_truthy(v));
        *out = use ? (def ? *def : jv_str("", 0)) : v;
        return 0;
    }
    case F_ESCAPE: {
        if (v.kind == JV_STR && (v.flags & JV_F_SAFE)) {
            *out = v;
            return 0;
        }
        struct jinja_value s = jv_stringify(a, v);
        struct buf b = {0};
        for (size_t i = 0; i < s.u.s.n; i++) {
            char c = s.u.s.s[i];
            const char *e = c == '&'    ? "&amp;"
                            : c == '<'  ? "&lt;"
                            : c == '>'  ? "&gt;"
                            : c == '"'  ? "&#34;"
                            : c == '\'' ? "&#39;"
                                        : NULL;
            if (e)
                buf_puts(&b, e);
            else
                buf_putc(&b, c);
        }
        *out = jv_strdup(a, b.data ? b.data : "", b.len);
        out->flags = JV_F_SAFE;
        buf_deinit(&b);
        return 0;
    }
    case F_REPLACE: {
        const struct jinja_value *cnt = jargs_get(args, 2, "count");
        if (!a0 || !jargs_get(args, 1, NULL))
            return jrt_fail(rt, "replace needs old and new");
        *out = py_replace(a, jv_stringify(a, v), jv_stringify(a, *a0),
                          jv_stringify(a, *jargs_get(args, 1, NULL)),
                          cnt && cnt->kind == JV_INT ? cnt->u.i : -1);
        return 0;
    }
    case F_ITEMS:
        if (v.kind == JV_UNDEF) {
            *out = jv_list_new(a, 0);
            out->flags = JV_F_GEN;
            return 0;
        }
        if (v.kind != JV_DICT)
            return jrt_fail(rt, "Can only get item pairs from a mapping.");
        {
            struct jargs none = {0};
            struct jinja_value self = v;
            rc = jinja_call_builtin(rt, M_ITEMS, &self, &none, out);
            out->flags = JV_F_GEN;
            return rc;
        }
    case F_LIST:
        if ((rc = jrt_iterate(rt, v, &items)) < 0)
            return rc;
        *out = jv_list_new(a, items->n);
        for (size_t i = 0; i < items->n; i++)
            jv_list_push(a, out->u.list, items->v[i]);
        return 0;
    case F_FIRST:
    case F_LAST:
        if (id == F_LAST && v.kind == JV_LIST && (v.flags & JV_F_GEN))
            return jrt_fail(rt, "'generator' object is not reversible");
        if ((rc = jrt_iterate(rt, v, &items)) < 0)
            return rc;
        if (items->n == 0)
            *out = jv_undef_hint(id == F_FIRST ? "No first item, sequence was empty."
                                               : "No last item, sequence was empty.");
        else
            *out = items->v[id == F_FIRST ? 0 : items->n - 1];
        return 0;
    case F_REVERSE:
        if (v.kind == JV_STR) {
            size_t *offs;
            size_t n = utf8_offsets(a, v.u.s.s, v.u.s.n, &offs);
            struct buf b = {0};
            for (size_t i = n; i > 0; i--)
                buf_append(&b, v.u.s.s + offs[i - 1], offs[i] - offs[i - 1]);
            *out = jv_strdup(a, b.data ? b.data : "", b.len);
            buf_deinit(&b);
            return 0;
        }
        if (v.kind == JV_LIST && (v.flags & JV_F_GEN))
            return jrt_fail(rt, "'generator' object is not reversible");
        if ((rc = jrt_iterate(rt, v, &items)) < 0)
            return rc;
        *out = jv_list_new(a, items->n);
        for (size_t i = items->n; i > 0; i--)
            jv_list_push(a, out->u.list, items->v[i - 1]);
        out->flags = JV_F_GEN; /* reversed(...) is an iterator */
        return 0;
    case F_JOIN:
        return f_join(rt, v, args, out);
    case F_INT:
        return f_int(rt, v, args, out);
    case F_FLOAT:
        return f_float(rt, v, args, out);
    case F_ROUND:
        return f_round(rt, v, args, out);
    case F_ABS:
        if (v.kind == JV_INT || v.kind == JV_BOOL) {
            int64_t i = v.kind == JV_INT ? v.u.i : v.u.b;
            *out = jv_int(i < 0 ? -i : i);
        } else if (v.kind == JV_FLOAT) {
            *out = jv_float(fabs(v.u.f));
        } else {
            return jrt_fail(rt, "bad operand type for abs(): '%s'", jv_type_name(v));
        }
        return 0;
    case F_SUM: {
        const struct jinja_value *attr = jargs_get(args, 0, "attribute");
        const struct jinja_value *start = jargs_get(args, 1, "start");
        struct jinja_value acc = start ? *start : jv_int(0);
        if ((rc = jrt_iterate(rt, v, &items)) < 0)
            return rc;
        for (size_t i = 0; i < items->n; i++) {
            struct jinja_value x = items->v[i];
            if (attr && attr->kind == JV_STR && (rc = attr_path(rt, x, *attr, &x)) < 0)
                return rc;
            bool acc_num = acc.kind == JV_INT || acc.kind == JV_FLOAT || acc.kind == JV_BOOL;
            bool x_num = x.kind == JV_INT || x.kind == JV_FLOAT || x.kind == JV_BOOL;
            if (!acc_num || !x_num)
                return jrt_fail(rt, "unsupported operand type(s) for +: '%s' and '%s'",
                                jv_type_name(acc), jv_type_name(x));
            if (acc.kind != JV_FLOAT && x.kind != JV_FLOAT)
                acc = jv_int((acc.kind == JV_INT ? acc.u.i : acc.u.b) +
                             (x.kind == JV_INT ? x.u.i : x.u.b));
            else
                acc = jv_float((acc.kind == JV_FLOAT ? acc.u.f
                                : acc.kind == JV_INT ? (double)acc.u.i
                                                     : acc.u.b) +
                               (x.kind == JV_FLOAT ? x.u.f
                                : x.kind == JV_INT ? (double)x.u.i
                                                   : x.u.b));
        }
        *out = acc;
        return 0;
    }
    case F_SELECT:
    case F_REJECT:
    case F_SELECTATTR:
    case F_REJECTATTR:
        return f_select(rt, id, v, args, out);
    case F_MAP:
        return f_map(rt, v, args, out);
    case F_FORMAT: { /* soft_str(value) % (kwargs or args) */
        if (args->n_pos && args->n_kw)
            return jrt_fail(rt, "can't handle positional and keyword arguments at the same time");
        struct jinja_value fa;
        if (args->n_kw) {
            fa = jv_dict_new(a, args->n_kw);
            for (size_t i = 0; i < args->n_kw; i++)
                jv_dict_set(a, fa.u.dict, jv_str(args->kw_names[i], strlen(args->kw_names[i])),
                            args->kw[i]);
        } else {
            fa = jv_list_new(a, args->n_pos);
            fa.flags = JV_F_TUPLE;
            for (size_t i = 0; i < args->n_pos; i++)
                jv_list_push(a, fa.u.list, args->pos[i]);
        }
        struct jinja_value s = jv_stringify(a, v);
        s.flags = 0;
        return jrt_percent_format(rt, s, fa, out);
    }
    case F_DICTSORT: { /* sorted(value.items(), key=key or value, lowercased unless
                        * case_sensitive) */
        const struct jinja_value *cs = jargs_get(args, 0, "case_sensitive");
        const struct jinja_value *by = jargs_get(args, 1, "by");
        const struct jinja_value *rev = jargs_get(args, 2, "reverse");
        if (v.kind != JV_DICT)
            return jrt_fail(rt, "You can only sort by either \"key\" or \"value\"");
        bool by_value = by && jv_is_str(*by, "value");
        if (by && !by_value && !jv_is_str(*by, "key"))
            return jrt_fail(rt, "You can only sort by either \"key\" or \"value\"");
        struct jargs none = {0};
        struct jinja_value self = v, pairs;
        if ((rc = jinja_call_builtin(rt, M_ITEMS, &self, &none, &pairs)) < 0)
            return rc;
        pairs.flags = 0;
        struct jinja_value sargs[3] = {rev ? *rev : jv_bool(false), cs ? *cs : jv_bool(false),
                                       jv_int(by_value ? 1 : 0)};
        struct jargs sa = {.pos = sargs, .n_pos = 3};
        return f_order(rt, F_SORT, pairs, &sa, out);
    }
    case F_SORT:
    case F_UNIQUE:
    case F_MIN:
    case F_MAX:
        return f_order(rt, id, v, args, out);
    case F_INDENT:
        return f_indent(rt, v, args, out);
    default:
        return jrt_fail(rt, "unsupported filter '%s'", jinja_builtin_name(id));
    }
}
