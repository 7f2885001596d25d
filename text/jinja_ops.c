/* jinja operators: Python semantics for + - * / // % ** (ints stay ints, overflow goes to float,
 * markupsafe escaping when a Markup string meets a plain one with +), ordering comparisons and
 * `in`. Type mismatches are errors, as TypeError is in Python. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/err.h"
#include "jinja_internal.h"

static bool is_number(struct jinja_value v)
{
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}

static double as_f(struct jinja_value v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}

static int64_t as_i(struct jinja_value v)
{
    return v.kind == JV_INT ? v.u.i : (int64_t)v.u.b;
}

static void html_escape(struct buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&':
            buf_puts(b, "&amp;");
            break;
        case '<':
            buf_puts(b, "&lt;");
            break;
        case '>':
            buf_puts(b, "&gt;");
            break;
        case '"':
            buf_puts(b, "&#34;");
            break;
        case '\'':
            buf_puts(b, "&#39;");
            break;
        default:
            buf_putc(b, s[i]);
        }
    }
}

static int binop_fail(struct jrt *rt, int op, struct jinja_value l, struct jinja_value r)
{
    if (l.kind == JV_UNDEF)
        return jrt_fail_undefined(rt, l);
    if (r.kind == JV_UNDEF)
        return jrt_fail_undefined(rt, r);
    const char *ops = op == 'F' ? "//" : op == 'P' ? "**" : (const char[]){(char)op, 0};
    return jrt_fail(rt, "unsupported operand type(s) for %s: '%s' and '%s'", ops, jv_type_name(l),
                    jv_type_name(r));
}

static int64_t floordiv_i(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static int overflow(struct jrt *rt)
{
    return jrt_fail(rt, "integer overflow: ints beyond 64 bits are not supported");
}

/* a ** b for b >= 0 by squaring; false on overflow */
static bool ipow(int64_t a, int64_t b, int64_t *out)
{
    int64_t acc = 1;
    while (b > 0) {
        if ((b & 1) && __builtin_mul_overflow(acc, a, &acc))
            return false;
        b >>= 1;
        if (b && __builtin_mul_overflow(a, a, &a))
            return false;
    }
    *out = acc;
    return true;
}

int jrt_binop(struct jrt *rt, int op, struct jinja_value l, struct jinja_value r,
              struct jinja_value *out)
{
    if ((l.kind == JV_BIGINT && (is_number(r) || r.kind == JV_BIGINT)) ||
        (r.kind == JV_BIGINT && is_number(l)))
        return overflow(rt);
    if (is_number(l) && is_number(r)) {
        bool ints = l.kind != JV_FLOAT && r.kind != JV_FLOAT;
        int64_t a = ints ? as_i(l) : 0, b = ints ? as_i(r) : 0, res;
        double x = as_f(l), y = as_f(r);
        switch (op) {
        case '+':
            if (!ints)
                *out = jv_float(x + y);
            else if (__builtin_add_overflow(a, b, &res))
                return overflow(rt);
            else
                *out = jv_int(res);
            return 0;
        case '-':
            if (!ints)
                *out = jv_float(x - y);
            else if (__builtin_sub_overflow(a, b, &res))
                return overflow(rt);
            else
                *out = jv_int(res);
            return 0;
        case '*':
            if (!ints)
                *out = jv_float(x * y);
            else if (__builtin_mul_overflow(a, b, &res))
                return overflow(rt);
            else
                *out = jv_int(res);
            return 0;
        case '/':
            if (y == 0)
                return jrt_fail(rt, "division by zero");
            *out = jv_float(x / y);
            return 0;
        case 'F':
            if (y == 0)
                return jrt_fail(rt, "integer division or modulo by zero");
            if (ints && a == INT64_MIN && b == -1)
                return overflow(rt);
            *out = ints ? jv_int(floordiv_i(a, b)) : jv_float(floor(x / y));
            return 0;
        case '%':
            if (y == 0)
                return jrt_fail(rt, "integer division or modulo by zero");
            if (ints) {
                *out = jv_int(b == -1 ? 0 : a - floordiv_i(a, b) * b);
            } else {
                double m = fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0)))
                    m += y;
                *out = jv_float(m);
            }
            return 0;
        case 'P':
            if (ints && b >= 0) {
                if (!ipow(a, b, &res))
                    return overflow(rt);
                *out = jv_int(res);
                return 0;
            }
            if (x == 0 && y < 0)
                return jrt_fail(rt, "0.0 cannot be raised to a negative power");
            *out = jv_float(pow(x, y));
            if (isinf(out->u.f) && isfinite(x) && isfinite(y))
                return jrt_fail(rt, "(34, 'Numerical result out of range')");
            return 0;
        default:
            break;
        }
    }
    if (op == '+' && l.kind == JV_STR && r.kind == JV_STR) {
        struct buf b = {0};
        bool safe = (l.flags | r.flags) & JV_F_SAFE;
        /* markupsafe: Markup + str escapes the plain operand */
        if (safe && !(l.flags & JV_F_SAFE))
            html_escape(&b, l.u.s.s, l.u.s.n);
        else
            buf_append(&b, l.u.s.s, l.u.s.n);
        if (safe && !(r.flags & JV_F_SAFE))
            html_escape(&b, r.u.s.s, r.u.s.n);
        else
            buf_append(&b, r.u.s.s, r.u.s.n);
        *out = jv_strdup(jrt_arena(rt), b.data ? b.data : "", b.len);
        if (safe)
            out->flags |= JV_F_SAFE;
        buf_deinit(&b);
        return 0;
    }
    if (op == '+' && l.kind == JV_LIST && r.kind == JV_LIST && !((l.flags | r.flags) & JV_F_LAZY) &&
        (l.flags & JV_F_TUPLE) == (r.flags & JV_F_TUPLE)) {
        *out = jv_list_new(jrt_arena(rt), l.u.list->n + r.u.list->n);
        out->flags = l.flags;
        for (size_t i = 0; i < l.u.list->n; i++)
            jv_list_push(jrt_arena(rt), out->u.list, l.u.list->v[i]);
        for (size_t i = 0; i < r.u.list->n; i++)
            jv_list_push(jrt_arena(rt), out->u.list, r.u.list->v[i]);
        return 0;
    }
    if (op == '*' && (l.kind == JV_STR || (l.kind == JV_LIST && !(l.flags & JV_F_LAZY))) &&
        (r.kind == JV_INT || r.kind == JV_BOOL)) {
        int64_t k = as_i(r);
        /* the result's size is known: refuse it before allocating (a repeat count of 10^10
         * must not run the machine out of memory), and an empty operand skips the loop */
        size_t unit = l.kind == JV_STR ? l.u.s.n : l.u.list->n * sizeof(struct jinja_value);
        if (k <= 0 || unit == 0)
            k = 0;
        else if (jrt_arena(rt)->total >= JINJA_ARENA_MAX ||
                 (uint64_t)k > (JINJA_ARENA_MAX - jrt_arena(rt)->total) / 2 / unit)
            return jrt_fail(rt, "repeated %s too large", l.kind == JV_STR ? "string" : "list");
        if (l.kind == JV_STR) {
            /* doubling copies: a one-byte string repeated 10^8 times is 27 memcpys */
            size_t len = unit * (size_t)k;
            char *d = ja_alloc(jrt_arena(rt), len + 1);
            size_t have = 0;
            if (len) {
                memcpy(d, l.u.s.s, unit);
                have = unit;
            }
            while (have < len) {
                size_t c = have < len - have ? have : len - have;
                memcpy(d + have, d, c);
                have += c;
            }
            d[len] = '\0';
            *out = jv_str(d, len);
            out->flags = l.flags & JV_F_SAFE;
        } else {
            *out = jv_list_new(jrt_arena(rt), 0);
            out->flags = l.flags;
            for (int64_t i = 0; i < k; i++)
                for (size_t j = 0; j < l.u.list->n; j++)
                    jv_list_push(jrt_arena(rt), out->u.list, l.u.list->v[j]);
        }
        return 0;
    }
    if (op == '*' && (r.kind == JV_STR || (r.kind == JV_LIST && !(r.flags & JV_F_LAZY))) &&
        (l.kind == JV_INT || l.kind == JV_BOOL))
        return jrt_binop(rt, op, r, l, out);
    if (op == '%' && l.kind == JV_STR)
        return jrt_percent_format(rt, l, r, out);
    return binop_fail(rt, op, l, r);
}

int jrt_compare_order(struct jrt *rt, struct jinja_value a, struct jinja_value b, int op, bool *res)
{
    int c;
    if (is_number(a) && is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT)
            c = as_i(a) < as_i(b) ? -1 : as_i(a) > as_i(b);
        else
            c = as_f(a) < as_f(b) ? -1 : as_f(a) > as_f(b) ? 1 : 0;
    } else if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        c = n ? memcmp(a.u.s.s, b.u.s.s, n) : 0;
        if (!c)
            c = a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    } else if (a.kind == JV_LIST && b.kind == JV_LIST && !((a.flags | b.flags) & JV_F_LAZY)) {
        size_t i = 0;
        while (i < a.u.list->n && i < b.u.list->n && jv_equal(a.u.list->v[i], b.u.list->v[i]))
            i++;
        if (i < a.u.list->n && i < b.u.list->n)
            return jrt_compare_order(rt, a.u.list->v[i], b.u.list->v[i], op, res);
        c = a.u.list->n < b.u.list->n ? -1 : a.u.list->n > b.u.list->n;
    } else {
        if (a.kind == JV_UNDEF)
            return jrt_fail_undefined(rt, a);
        if (b.kind == JV_UNDEF)
            return jrt_fail_undefined(rt, b);
        const char *ops = op == JCMP_LT ? "<" : op == JCMP_LE ? "<=" : op == JCMP_GT ? ">" : ">=";
        return jrt_fail(rt, "'%s' not supported between instances of '%s' and '%s'", ops,
                        jv_type_name(a), jv_type_name(b));
    }
    *res = op == JCMP_LT ? c < 0 : op == JCMP_LE ? c <= 0 : op == JCMP_GT ? c > 0 : c >= 0;
    return 0;
}

int jrt_contains(struct jrt *rt, struct jinja_value hay, struct jinja_value needle, bool *res)
{
    switch (hay.kind) {
    case JV_STR:
        if (needle.kind != JV_STR)
            return jrt_fail(rt, "'in <string>' requires string as left operand, not %s",
                            jv_type_name(needle));
        if (needle.u.s.n == 0) {
            *res = true;
            return 0;
        }
        *res = false;
        for (size_t i = 0; i + needle.u.s.n <= hay.u.s.n; i++)
            if (memcmp(hay.u.s.s + i, needle.u.s.s, needle.u.s.n) == 0) {
                *res = true;
                break;
            }
        return 0;
    case JV_LIST:
        *res = false;
        for (size_t i = 0; i < hay.u.list->n && !*res; i++)
            *res = jv_equal(hay.u.list->v[i], needle);
        return 0;
    case JV_DICT:
        if ((needle.kind == JV_LIST && !(needle.flags & JV_F_TUPLE)) || needle.kind == JV_DICT ||
            needle.kind == JV_NS)
            return jrt_fail(rt, "unhashable type: '%s'", jv_type_name(needle));
        *res = jv_dict_find(hay.u.dict, needle) != NULL;
        return 0;
    case JV_UNDEF:
        *res = false;
        return 0;
    default:
        return jrt_fail(rt, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}
