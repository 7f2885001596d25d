/* jinja JSON: parse JSON into jinja values the way Python's json.loads does (ints stay ints,
 * object order kept, the last duplicate key wins in the first key's place), and serialise values
 * the way json.dumps does (HF's tojson: ensure_ascii=False, optional indent / sort_keys). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "jinja_internal.h"

#define JSON_DEPTH_MAX 256

// ---- parse ----

struct jp {
    struct jarena *a;
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
};

static int jp_fail(struct jp *p, const char *what)
{
    if (p->err && p->errlen)
        snprintf(p->err, p->errlen, "invalid JSON at offset %zu: %s", p->i, what);
    return ERR_INVAL;
}

static void jp_ws(struct jp *p)
{
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int hex4(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static int jp_string(struct jp *p, struct jinja_value *out)
{
    p->i++; /* opening quote */
    size_t start = p->i;
    /* fast path: no escapes */
    while (p->i < p->n && p->s[p->i] != '"' && p->s[p->i] != '\\' &&
           (unsigned char)p->s[p->i] >= 0x20)
        p->i++;
    if (p->i < p->n && p->s[p->i] == '"') {
        *out = jv_strdup(p->a, p->s + start, p->i - start);
        p->i++;
        return 0;
    }
    struct buf b = {0};
    buf_append(&b, p->s + start, p->i - start);
    int rc = 0;
    for (;;) {
        if (p->i >= p->n) {
            rc = jp_fail(p, "unterminated string");
            goto out;
        }
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            break;
        }
        if (c < 0x20) {
            rc = jp_fail(p, "control character in string");
            goto out;
        }
        if (c != '\\') {
            buf_putc(&b, (char)c);
            p->i++;
            continue;
        }
        if (p->i + 1 >= p->n) {
            rc = jp_fail(p, "bad escape");
            goto out;
        }
        char e = p->s[p->i + 1];
        p->i += 2;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            buf_putc(&b, e);
            break;
        case 'b':
            buf_putc(&b, '\b');
            break;
        case 'f':
            buf_putc(&b, '\f');
            break;
        case 'n':
            buf_putc(&b, '\n');
            break;
        case 'r':
            buf_putc(&b, '\r');
            break;
        case 't':
            buf_putc(&b, '\t');
            break;
        case 'u': {
            uint32_t cp;
            if (p->i + 4 > p->n || hex4(p->s + p->i, &cp) < 0) {
                rc = jp_fail(p, "bad \\u escape");
                goto out;
            }
            p->i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' &&
                p->s[p->i + 1] == 'u') {
                uint32_t lo;
                if (hex4(p->s + p->i + 2, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p->i += 6;
                }
            }
            char u[4];
            buf_append(&b, u, utf8_encode(cp, u));
            break;
        }
        default:
            rc = jp_fail(p, "bad escape");
            goto out;
        }
    }
    *out = jv_strdup(p->a, b.data ? b.data : "", b.len);
out:
    buf_deinit(&b);
    return rc;
}

static int jp_number(struct jp *p, struct jinja_value *out)
{
    size_t st = p->i;
    bool is_float = false;
    if (p->s[p->i] == '-')
        p->i++;
    if (p->i < p->n && p->s[p->i] == '0') {
        p->i++;
    } else if (p->i < p->n && p->s[p->i] >= '1' && p->s[p->i] <= '9') {
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    } else {
        return jp_fail(p, "bad number");
    }
    if (p->i + 1 < p->n && p->s[p->i] == '.' && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9') {
        is_float = true;
        p->i++;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        size_t save = p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            is_float = true;
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
                p->i++;
        } else {
            p->i = save;
        }
    }
    char tmp[64];
    size_t len = p->i - st;
    char *num = len < sizeof(tmp) ? tmp : ja_alloc(p->a, len + 1);
    memcpy(num, p->s + st, len);
    num[len] = 0;
    if (!is_float) {
        char *end;
        errno = 0;
        long long v = strtoll(num, &end, 10);
        if (errno == 0) {
            *out = jv_int(v);
            return 0;
        }
        *out = jv_strdup(p->a, num, len); /* Python keeps it exact: so do we, as text */
        out->kind = JV_BIGINT;
        return 0;
    }
    *out = jv_float(strtod(num, NULL));
    return 0;
}

static bool jp_word(struct jp *p, const char *w)
{
    size_t n = strlen(w);
    if (p->n - p->i >= n && memcmp(p->s + p->i, w, n) == 0) {
        p->i += n;
        return true;
    }
    return false;
}

static int jp_value(struct jp *p, struct jinja_value *out, int depth)
{
    if (depth > JSON_DEPTH_MAX)
        return jp_fail(p, "nesting too deep");
    jp_ws(p);
    if (p->i >= p->n)
        return jp_fail(p, "unexpected end");
    char c = p->s[p->i];
    int rc;
    if (c == '{') {
        p->i++;
        *out = jv_dict_new(p->a, 0);
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            return 0;
        }
        for (;;) {
            jp_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"')
                return jp_fail(p, "expected a key");
            struct jinja_value k, v;
            if ((rc = jp_string(p, &k)) < 0)
                return rc;
            jp_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':')
                return jp_fail(p, "expected ':'");
            p->i++;
            if ((rc = jp_value(p, &v, depth + 1)) < 0)
                return rc;
            jv_dict_set(p->a, out->u.dict, k, v);
            jp_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == '}') {
                p->i++;
                return 0;
            }
            return jp_fail(p, "expected ',' or '}'");
        }
    }
    if (c == '[') {
        p->i++;
        *out = jv_list_new(p->a, 0);
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            return 0;
        }
        for (;;) {
            struct jinja_value v;
            if ((rc = jp_value(p, &v, depth + 1)) < 0)
                return rc;
            jv_list_push(p->a, out->u.list, v);
            jp_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == ']') {
                p->i++;
                return 0;
            }
            return jp_fail(p, "expected ',' or ']'");
        }
    }
    if (c == '"')
        return jp_string(p, out);
    if (jp_word(p, "true")) {
        *out = jv_bool(true);
        return 0;
    }
    if (jp_word(p, "false")) {
        *out = jv_bool(false);
        return 0;
    }
    if (jp_word(p, "null")) {
        *out = jv_none();
        return 0;
    }
    if (jp_word(p, "NaN")) {
        *out = jv_float(NAN);
        return 0;
    }
    if (jp_word(p, "Infinity")) {
        *out = jv_float(INFINITY);
        return 0;
    }
    if (jp_word(p, "-Infinity")) {
        *out = jv_float(-INFINITY);
        return 0;
    }
    return jp_number(p, out);
}

int jv_json_parse(struct jarena *a, const char *s, size_t n, struct jinja_value *out, char *err,
                  size_t errlen)
{
    struct jp p = {.a = a, .s = s, .n = n, .i = 0, .err = err, .errlen = errlen};
    int rc = jp_value(&p, out, 0);
    if (rc < 0)
        return rc;
    jp_ws(&p);
    if (p.i != p.n)
        return jp_fail(&p, "extra data");
    return 0;
}

// ---- dump ----

static void dump_str(struct buf *b, const char *s, size_t n, bool ascii)
{
    buf_putc(b, '"');
    size_t run = 0; /* start of a run of bytes copied as is */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        size_t next = i + 1;
        if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c == '\b')
            esc = "\\b";
        else if (c == '\f')
            esc = "\\f";
        else if (c < 0x20 || (c == 0x7f && ascii)) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", c);
            esc = tmp;
        } else if (c >= 0x80 && ascii) {
            next = utf8_next(s, n, i);
            uint32_t cp = utf8_decode(s, n, i);
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(tmp, sizeof(tmp), "\\u%04x\\u%04x", 0xD800 + (v >> 10),
                         0xDC00 + (v & 0x3FF));
            } else {
                snprintf(tmp, sizeof(tmp), "\\u%04x", cp);
            }
            esc = tmp;
        }
        if (esc) {
            buf_append(b, s + run, i - run);
            buf_puts(b, esc);
            run = next;
        }
        i = next;
    }
    buf_append(b, s + run, n - run);
    buf_putc(b, '"');
}

static void dump_float(struct buf *b, double f)
{
    if (isnan(f))
        buf_puts(b, "NaN");
    else if (isinf(f))
        buf_puts(b, f < 0 ? "-Infinity" : "Infinity");
    else
        jv_float_repr(b, f);
}

static void newline_indent(struct buf *b, const struct tojson_opts *o, int level)
{
    buf_putc(b, '\n');
    for (int i = 0; i < level; i++)
        buf_append(b, o->indent, o->indent_n);
}

static int key_cmp(const void *x, const void *y)
{
    const struct jinja_value *a = *(const struct jinja_value *const *)x;
    const struct jinja_value *c = *(const struct jinja_value *const *)y;
    size_t n = a->u.s.n < c->u.s.n ? a->u.s.n : c->u.s.n;
    int r = n ? memcmp(a->u.s.s, c->u.s.s, n) : 0;
    if (r)
        return r;
    return a->u.s.n < c->u.s.n ? -1 : a->u.s.n > c->u.s.n;
}

static int dump(struct buf *b, struct jinja_value v, const struct tojson_opts *o, int level,
                char *msg, size_t msglen)
{
    if (level > JSON_DEPTH_MAX) {
        snprintf(msg, msglen, "tojson: nesting too deep");
        return ERR_INVAL;
    }
    switch (v.kind) {
    case JV_NONE:
        buf_puts(b, "null");
        return 0;
    case JV_BOOL:
        buf_puts(b, v.u.b ? "true" : "false");
        return 0;
    case JV_INT:
        buf_printf(b, "%lld", (long long)v.u.i);
        return 0;
    case JV_BIGINT:
        buf_append(b, v.u.s.s, v.u.s.n);
        return 0;
    case JV_FLOAT:
        dump_float(b, v.u.f);
        return 0;
    case JV_STR:
        dump_str(b, v.u.s.s, v.u.s.n, o->ensure_ascii);
        return 0;
    case JV_LIST: {
        if (v.flags & JV_F_LAZY) {
            snprintf(msg, msglen, "Object of type %s is not JSON serializable", jv_type_name(v));
            return ERR_INVAL;
        }
        if (v.u.list->n == 0) {
            buf_puts(b, "[]");
            return 0;
        }
        buf_putc(b, '[');
        for (size_t i = 0; i < v.u.list->n; i++) {
            if (i)
                buf_append(b, o->item_sep, o->item_sep_n);
            if (o->indent)
                newline_indent(b, o, level + 1);
            int rc = dump(b, v.u.list->v[i], o, level + 1, msg, msglen);
            if (rc < 0)
                return rc;
        }
        if (o->indent)
            newline_indent(b, o, level);
        buf_putc(b, ']');
        return 0;
    }
    case JV_DICT: {
        const struct jv_dict *d = v.u.dict;
        if (d->n == 0) {
            buf_puts(b, "{}");
            return 0;
        }
        size_t *order = malloc(d->n * sizeof(*order));
        if (!order)
            return ERR_NOMEM;
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (o->sort_keys) {
            const struct jinja_value **keys = malloc(d->n * sizeof(*keys));
            if (!keys) {
                free(order);
                return ERR_NOMEM;
            }
            for (size_t i = 0; i < d->n; i++) {
                if (d->k[i].kind != JV_STR) {
                    free(keys);
                    free(order);
                    snprintf(msg, msglen, "tojson: sort_keys needs str keys");
                    return ERR_INVAL;
                }
                keys[i] = &d->k[i];
            }
            qsort(keys, d->n, sizeof(*keys), key_cmp);
            for (size_t i = 0; i < d->n; i++)
                order[i] = (size_t)(keys[i] - d->k);
            free(keys);
        }
        int rc = 0;
        buf_putc(b, '{');
        for (size_t j = 0; j < d->n; j++) {
            size_t i = order[j];
            if (j)
                buf_append(b, o->item_sep, o->item_sep_n);
            if (o->indent)
                newline_indent(b, o, level + 1);
            struct jinja_value k = d->k[i];
            if (k.kind == JV_STR) {
                dump_str(b, k.u.s.s, k.u.s.n, o->ensure_ascii);
            } else if (k.kind == JV_INT || k.kind == JV_BOOL || k.kind == JV_NONE) {
                buf_putc(b, '"');
                if (k.kind == JV_INT)
                    buf_printf(b, "%lld", (long long)k.u.i);
                else
                    buf_puts(b, k.kind == JV_NONE ? "null" : k.u.b ? "true" : "false");
                buf_putc(b, '"');
            } else if (k.kind == JV_FLOAT) {
                buf_putc(b, '"');
                dump_float(b, k.u.f);
                buf_putc(b, '"');
            } else {
                snprintf(msg, msglen, "keys must be str, int, float, bool or None, not %s",
                         jv_type_name(k));
                rc = ERR_INVAL;
                break;
            }
            buf_append(b, o->key_sep, o->key_sep_n);
            rc = dump(b, d->v[i], o, level + 1, msg, msglen);
            if (rc < 0)
                break;
        }
        free(order);
        if (rc < 0)
            return rc;
        if (o->indent)
            newline_indent(b, o, level);
        buf_putc(b, '}');
        return 0;
    }
    default:
        snprintf(msg, msglen, "Object of type %s is not JSON serializable", jv_type_name(v));
        return ERR_INVAL;
    }
}

int jv_tojson(struct buf *b, struct jinja_value v, const struct tojson_opts *o, char *msg,
              size_t msglen)
{
    return dump(b, v, o, 0, msg, msglen);
}
