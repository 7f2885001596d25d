/* Python str methods on UTF-8 values, with Python's semantics: code-point indices, Unicode
 * whitespace for strip()/split(), split(None) on whitespace runs, splitlines() line breaks. */
#include <string.h>

#include <utf8proc.h>

#include "jinja_internal.h"

static bool in_chars(uint32_t cp, const struct jinja_value *chars)
{
    if (!chars)
        return py_isspace(cp);
    const char *c = chars->u.s.s;
    size_t n = chars->u.s.n;
    for (size_t i = 0; i < n; i = utf8_next(c, n, i))
        if (utf8_decode(c, n, i) == cp)
            return true;
    return false;
}

struct jinja_value py_strip(struct jinja_value s, const struct jinja_value *chars,
                            enum py_strip_mode mode)
{
    const char *p = s.u.s.s;
    size_t n = s.u.s.n, b = 0, e = n;
    if (mode != PY_STRIP_RIGHT)
        while (b < e && in_chars(utf8_decode(p, n, b), chars))
            b = utf8_next(p, n, b);
    if (mode != PY_STRIP_LEFT)
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)p[st] & 0xC0) == 0x80)
                st--;
            if (!in_chars(utf8_decode(p, n, st), chars))
                break;
            e = st;
        }
    struct jinja_value r = jv_str(p + b, e - b);
    r.flags = s.flags & JV_F_SAFE;
    return r;
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn == 0)
        return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0)
            return h + i;
    return NULL;
}

static const char *rfind_bytes(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn > hn)
        return NULL;
    for (size_t i = hn - nn + 1; i > 0; i--)
        if (memcmp(h + i - 1, nd, nn) == 0)
            return h + i - 1;
    return NULL;
}

static void push_part(struct jarena *a, struct jinja_value *list, struct jinja_value s,
                      const char *p, size_t n)
{
    struct jinja_value v = jv_str(p, n);
    v.flags = s.flags & JV_F_SAFE;
    jv_list_push(a, list->u.list, v);
}

static void reverse_list(struct jv_list *l)
{
    for (size_t i = 0, j = l->n; i + 1 < j; i++, j--) {
        struct jinja_value t = l->v[i];
        l->v[i] = l->v[j - 1];
        l->v[j - 1] = t;
    }
}

static size_t ws_prev(const char *p, size_t lo, size_t i) /* start of the code point before i */
{
    size_t st = i - 1;
    while (st > lo && ((unsigned char)p[st] & 0xC0) == 0x80)
        st--;
    return st;
}

struct jinja_value py_split(struct jarena *a, struct jinja_value s, const struct jinja_value *sep,
                            int64_t maxsplit, bool right)
{
    struct jinja_value out = jv_list_new(a, 4);
    const char *p = s.u.s.s;
    size_t n = s.u.s.n;
    if (sep) {
        const char *d = sep->u.s.s;
        size_t dn = sep->u.s.n;
        if (!right) {
            size_t at = 0;
            while (maxsplit != 0) {
                const char *f = find_bytes(p + at, n - at, d, dn);
                if (!f)
                    break;
                push_part(a, &out, s, p + at, (size_t)(f - (p + at)));
                at = (size_t)(f - p) + dn;
                if (maxsplit > 0)
                    maxsplit--;
            }
            push_part(a, &out, s, p + at, n - at);
        } else {
            size_t end = n;
            while (maxsplit != 0) {
                const char *f = rfind_bytes(p, end, d, dn);
                if (!f)
                    break;
                size_t fo = (size_t)(f - p);
                push_part(a, &out, s, p + fo + dn, end - fo - dn);
                end = fo;
                if (maxsplit > 0)
                    maxsplit--;
            }
            push_part(a, &out, s, p, end);
            reverse_list(out.u.list);
        }
        return out;
    }
    if (!right) {
        size_t i = 0;
        for (;;) {
            while (i < n && py_isspace(utf8_decode(p, n, i)))
                i = utf8_next(p, n, i);
            if (i >= n)
                break;
            if (maxsplit == 0) { /* the rest keeps its trailing whitespace */
                push_part(a, &out, s, p + i, n - i);
                break;
            }
            size_t st = i;
            while (i < n && !py_isspace(utf8_decode(p, n, i)))
                i = utf8_next(p, n, i);
            push_part(a, &out, s, p + st, i - st);
            if (maxsplit > 0)
                maxsplit--;
        }
        return out;
    }
    size_t e = n;
    for (;;) {
        while (e > 0 && py_isspace(utf8_decode(p, n, ws_prev(p, 0, e))))
            e = ws_prev(p, 0, e);
        if (e == 0)
            break;
        if (maxsplit == 0) { /* the rest keeps its leading whitespace */
            push_part(a, &out, s, p, e);
            break;
        }
        size_t b = e;
        while (b > 0 && !py_isspace(utf8_decode(p, n, ws_prev(p, 0, b))))
            b = ws_prev(p, 0, b);
        push_part(a, &out, s, p + b, e - b);
        e = b;
        if (maxsplit > 0)
            maxsplit--;
    }
    reverse_list(out.u.list);
    return out;
}

struct jinja_value py_replace(struct jarena *a, struct jinja_value s, struct jinja_value old,
                              struct jinja_value new_, int64_t count)
{
    struct buf b = {0};
    const char *p = s.u.s.s;
    size_t n = s.u.s.n;
    if (old.u.s.n == 0) { /* insert new_ between code points (and at both ends) */
        size_t i = 0;
        for (;;) {
            if (count != 0) {
                buf_append(&b, new_.u.s.s, new_.u.s.n);
                if (count > 0)
                    count--;
            }
            if (i >= n)
                break;
            size_t j = utf8_next(p, n, i);
            buf_append(&b, p + i, j - i);
            i = j;
        }
    } else {
        size_t at = 0;
        while (count != 0) {
            const char *f = find_bytes(p + at, n - at, old.u.s.s, old.u.s.n);
            if (!f)
                break;
            buf_append(&b, p + at, (size_t)(f - (p + at)));
            buf_append(&b, new_.u.s.s, new_.u.s.n);
            at = (size_t)(f - p) + old.u.s.n;
            if (count > 0)
                count--;
        }
        buf_append(&b, p + at, n - at);
    }
    struct jinja_value r = jv_strdup(a, b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return r;
}

struct jinja_value py_case(struct jarena *a, struct jinja_value s, int mode)
{
    struct buf b = {0};
    const char *p = s.u.s.s;
    size_t n = s.u.s.n;
    bool first = true;
    for (size_t i = 0; i < n; i = utf8_next(p, n, i)) {
        uint32_t cp = utf8_decode(p, n, i);
        bool up = mode == 'u' || (mode == 'c' && first);
        uint32_t m;
        if (mode == 'c' && first)
            m = (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp);
        else
            m = (uint32_t)(up ? utf8proc_toupper((utf8proc_int32_t)cp)
                              : utf8proc_tolower((utf8proc_int32_t)cp));
        char u[4];
        buf_append(&b, u, utf8_encode(m, u));
        first = false;
    }
    struct jinja_value r = jv_strdup(a, b.data ? b.data : "", b.len);
    r.flags = s.flags & JV_F_SAFE;
    buf_deinit(&b);
    return r;
}

static size_t line_break(const char *p, size_t n, size_t i) /* bytes of the break at i, or 0 */
{
    uint32_t cp = utf8_decode(p, n, i);
    if (cp == '\r')
        return (i + 1 < n && p[i + 1] == '\n') ? 2 : 1;
    if (cp == '\n' || cp == '\v' || cp == '\f' || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
        cp == 0x85 || cp == 0x2028 || cp == 0x2029)
        return utf8_next(p, n, i) - i;
    return 0;
}

struct jinja_value py_splitlines(struct jarena *a, struct jinja_value s, bool keepends)
{
    struct jinja_value out = jv_list_new(a, 4);
    const char *p = s.u.s.s;
    size_t n = s.u.s.n, st = 0, i = 0;
    while (i < n) {
        size_t br = line_break(p, n, i);
        if (!br) {
            i = utf8_next(p, n, i);
            continue;
        }
        push_part(a, &out, s, p + st, (keepends ? i + br : i) - st);
        i += br;
        st = i;
    }
    if (st < n)
        push_part(a, &out, s, p + st, n - st);
    return out;
}

int64_t py_find(struct jinja_value s, struct jinja_value sub, bool right)
{
    const char *f = right ? rfind_bytes(s.u.s.s, s.u.s.n, sub.u.s.s, sub.u.s.n)
                          : find_bytes(s.u.s.s, s.u.s.n, sub.u.s.s, sub.u.s.n);
    if (!f)
        return -1;
    return (int64_t)utf8_len(s.u.s.s, (size_t)(f - s.u.s.s));
}

int64_t py_count(struct jinja_value s, struct jinja_value sub)
{
    if (sub.u.s.n == 0)
        return (int64_t)utf8_len(s.u.s.s, s.u.s.n) + 1;
    int64_t c = 0;
    size_t at = 0;
    const char *f;
    while ((f = find_bytes(s.u.s.s + at, s.u.s.n - at, sub.u.s.s, sub.u.s.n))) {
        c++;
        at = (size_t)(f - s.u.s.s) + sub.u.s.n;
    }
    return c;
}
