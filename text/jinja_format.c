/* jinja printf-style formatting: Python's `str % args` (and so the `format` filter) for the
 * conversions s r a d i u x X o e E f F g G c %, with flags, width, precision and %(key)s
 * mapping keys. `*` widths are refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "jinja_internal.h"

#define FMT_WIDTH_MAX 4096 /* largest %-format width or precision accepted */

struct spec {
    bool left, zero, space, plus, alt;
    int width;     // -1: none
    int precision; // -1: none
    char conv;
};

/* Pad text (code points counted) to spec->width. */
static void put_padded(struct buf *b, const struct spec *sp, const char *s, size_t n)
{
    size_t len = utf8_len(s, n);
    size_t pad = sp->width > 0 && (size_t)sp->width > len ? (size_t)sp->width - len : 0;
    if (!sp->left)
        for (size_t i = 0; i < pad; i++)
            buf_putc(b, ' ');
    buf_append(b, s, n);
    if (sp->left)
        for (size_t i = 0; i < pad; i++)
            buf_putc(b, ' ');
}

/* "%" and the spec's flags into f (at most 6 chars); alt: with '#'. Returns the length. */
static int put_flags(char *f, const struct spec *sp, bool alt)
{
    int k = 0;
    f[k++] = '%';
    if (sp->left)
        f[k++] = '-';
    if (sp->zero)
        f[k++] = '0';
    if (sp->space)
        f[k++] = ' ';
    if (sp->plus)
        f[k++] = '+';
    if (alt && sp->alt)
        f[k++] = '#';
    return k;
}

static int conv_number(struct jrt *rt, struct buf *b, const struct spec *sp, struct jinja_value v)
{
    char cfmt[32], tmp[512];
    int k = put_flags(cfmt, sp, true);
    cfmt[k++] = '*';
    cfmt[k++] = '.';
    cfmt[k++] = '*';
    /* C ignores the 0 flag of an integer conversion that has a precision: give one only when
     * the format did (Python's default for %d is no precision, for floats 6) */
    bool is_num = v.kind == JV_INT || v.kind == JV_BOOL || v.kind == JV_FLOAT;
    int w = sp->width < 0 ? 0 : sp->width;
    int n;
    switch (sp->conv) {
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
        bool hexoct = sp->conv == 'x' || sp->conv == 'X' || sp->conv == 'o';
        if (!is_num || (hexoct && v.kind == JV_FLOAT))
            return jrt_fail(rt, "%%%c format: %s is required, not %s", sp->conv,
                            hexoct ? "an integer" : "a real number", jv_type_name(v));
        if (sp->conv == 'o' && sp->alt)
            return jrt_fail(rt, "unsupported construct: %%#o formatting");
        if (v.kind == JV_FLOAT && isnan(v.u.f))
            return jrt_fail(rt, "cannot convert float NaN to integer");
        if (v.kind == JV_FLOAT && isinf(v.u.f))
            return jrt_fail(rt, "cannot convert float infinity to integer");
        if (v.kind == JV_FLOAT && !(fabs(v.u.f) < 9.2e18)) {
            /* past long long: the float is an integer there; %.0f prints it exactly, as
             * Python's int(x) does (the flags and width carry over; a precision cannot) */
            if (sp->precision >= 0)
                return jrt_fail(rt, "unsupported construct: %%.N%c of a float this large",
                                sp->conv);
            char ff[16];
            memcpy(ff + put_flags(ff, sp, false), "*.0f", 5); /* '#' would print a point */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
            n = snprintf(tmp, sizeof(tmp), ff, w, v.u.f);
#pragma GCC diagnostic pop
            break;
        }
        long long x = v.kind == JV_INT ? v.u.i : v.kind == JV_BOOL ? v.u.b : (long long)v.u.f;
        cfmt[k++] = 'l';
        cfmt[k++] = 'l';
        cfmt[k++] = sp->conv == 'i' || sp->conv == 'u' ? 'd' : sp->conv;
        cfmt[k] = 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        if (sp->precision < 0) { /* drop the ".*" */
            memmove(cfmt + k - 5, cfmt + k - 3, 4);
            n = snprintf(tmp, sizeof(tmp), cfmt, w, x);
        } else {
            n = snprintf(tmp, sizeof(tmp), cfmt, w, sp->precision, x);
        }
#pragma GCC diagnostic pop
        break;
    }
    default: { /* e E f F g G */
        if (!is_num)
            return jrt_fail(rt, "must be real number, not %s", jv_type_name(v));
        double x = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
        cfmt[k++] = sp->conv;
        cfmt[k] = 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        n = snprintf(tmp, sizeof(tmp), cfmt, w, sp->precision < 0 ? 6 : sp->precision, x);
#pragma GCC diagnostic pop
    }
    }
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return jrt_fail(rt, "formatted number too long");
    buf_append(b, tmp, (size_t)n);
    return 0;
}

static int convert(struct jrt *rt, struct buf *b, const struct spec *sp, struct jinja_value v)
{
    struct buf t = {0};
    switch (sp->conv) {
    case 's':
    case 'r':
    case 'a': {
        if (sp->conv == 's')
            jv_to_str(&t, v);
        else
            jv_repr(&t, v);
        size_t n = t.len;
        if (sp->precision >= 0) { /* truncate to precision code points */
            size_t i = 0;
            for (int c = 0; c < sp->precision && i < t.len; c++)
                i = utf8_next(t.data, t.len, i);
            n = i;
        }
        put_padded(b, sp, t.data ? t.data : "", n);
        buf_deinit(&t);
        return 0;
    }
    case 'c': {
        char u[4];
        size_t n;
        if (v.kind == JV_INT && v.u.i >= 0 && v.u.i <= 0x10FFFF) {
            n = utf8_encode((uint32_t)v.u.i, u);
        } else if (v.kind == JV_STR && utf8_len(v.u.s.s, v.u.s.n) == 1) {
            n = v.u.s.n;
            memcpy(u, v.u.s.s, n);
        } else {
            return jrt_fail(rt, "%%c requires int or char");
        }
        put_padded(b, sp, u, n);
        return 0;
    }
    default:
        return conv_number(rt, b, sp, v);
    }
}

int jrt_percent_format(struct jrt *rt, struct jinja_value fmt, struct jinja_value args,
                       struct jinja_value *out)
{
    const char *f = fmt.u.s.s;
    size_t n = fmt.u.s.n, next_arg = 0;
    bool tuple = args.kind == JV_LIST && (args.flags & JV_F_TUPLE);
    size_t n_args = tuple ? args.u.list->n : 1;
    bool used_mapping = false;
    struct buf b = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i] != '%') { /* the literal run up to the next '%' in one copy */
            const char *pct = memchr(f + i, '%', n - i);
            size_t run = pct ? (size_t)(pct - (f + i)) : n - i;
            buf_append(&b, f + i, run);
            i += run - 1;
            continue;
        }
        if (++i >= n) {
            rc = jrt_fail(rt, "incomplete format");
            goto out;
        }
        struct spec sp = {.width = -1, .precision = -1};
        struct jinja_value v;
        bool have_v = false;
        if (f[i] == '(') {
            size_t st = ++i;
            while (i < n && f[i] != ')')
                i++;
            if (i >= n || args.kind != JV_DICT) {
                rc = jrt_fail(rt, i >= n ? "incomplete format key" : "format requires a mapping");
                goto out;
            }
            struct jinja_value *mv = jv_dict_get(args.u.dict, f + st, i - st);
            if (!mv) {
                rc = jrt_fail(rt, "KeyError: '%.*s'", (int)(i - st), f + st);
                goto out;
            }
            v = *mv;
            have_v = used_mapping = true;
            i++;
        }
        for (; i < n && strchr("-0 +#", f[i]); i++) {
            sp.left |= f[i] == '-';
            sp.zero |= f[i] == '0';
            sp.space |= f[i] == ' ';
            sp.plus |= f[i] == '+';
            sp.alt |= f[i] == '#';
        }
        if (i < n && f[i] == '*') {
            rc = jrt_fail(rt, "unsupported construct: '*' width in string formatting");
            goto out;
        }
        /* digits saturate just past the limit checked below, so long ones cannot overflow */
        for (; i < n && f[i] >= '0' && f[i] <= '9'; i++)
            sp.width = sp.width > FMT_WIDTH_MAX
                           ? FMT_WIDTH_MAX + 1
                           : (sp.width < 0 ? 0 : sp.width * 10) + (f[i] - '0');
        if (i < n && f[i] == '.') {
            sp.precision = 0;
            for (i++; i < n && f[i] >= '0' && f[i] <= '9'; i++)
                sp.precision = sp.precision > FMT_WIDTH_MAX ? FMT_WIDTH_MAX + 1
                                                            : sp.precision * 10 + (f[i] - '0');
        }
        while (i < n && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L'))
            i++;
        if (i >= n || !f[i] || !strchr("sradiuxXoeEfFgGc%", f[i])) {
            rc = jrt_fail(rt, "unsupported format character '%c'", i < n ? f[i] : '?');
            goto out;
        }
        sp.conv = f[i];
        if (sp.conv == '%') {
            buf_putc(&b, '%');
            continue;
        }
        if (sp.width > FMT_WIDTH_MAX || sp.precision > FMT_WIDTH_MAX) {
            rc = jrt_fail(rt, "format width too large");
            goto out;
        }
        if (!have_v) {
            if (next_arg >= n_args) {
                rc = jrt_fail(rt, "not enough arguments for format string");
                goto out;
            }
            v = tuple ? args.u.list->v[next_arg] : args;
            next_arg++;
        }
        if ((rc = convert(rt, &b, &sp, v)) < 0)
            goto out;
    }
    /* like CPython, a list or dict argument (a "mapping" to it) may go unused */
    bool mapping_like = !tuple && (args.kind == JV_DICT || args.kind == JV_LIST);
    if (!used_mapping && next_arg < n_args && !mapping_like) {
        rc = jrt_fail(rt, "not all arguments converted during string formatting");
        goto out;
    }
    *out = jv_strdup(jrt_arena(rt), b.data ? b.data : "", b.len);
out:
    buf_deinit(&b);
    return rc;
}
