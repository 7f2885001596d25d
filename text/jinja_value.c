/* jinja values: the arena, Python-like values with their truthiness, equality,
 * str() and repr(), and the UTF-8 helpers that give Python's code-point semantics. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "common/xalloc.h"
#include "jinja_internal.h"

// ---- arena ----

#define JA_CHUNK 65536

struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void ja_init(struct jarena *a)
{
    a->head = NULL;
    a->total = 0;
}

void ja_deinit(struct jarena *a)
{
    struct jchunk *c = a->head;
    while (c) {
        struct jchunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

void *ja_alloc(struct jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    struct jchunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > JA_CHUNK / 2 ? n : JA_CHUNK;
        c = xmalloc(sizeof(*c) + cap);
        c->used = 0;
        c->cap = cap;
        if (n > JA_CHUNK / 2 && a->head) { /* big block: keep the current chunk in front */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += n;
    a->total += n;
    return p;
}

char *ja_strndup(struct jarena *a, const char *s, size_t n)
{
    char *p = ja_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

// ---- constructors ----

struct jinja_value jv_undef(const char *name)
{
    struct jinja_value v = {.kind = JV_UNDEF};
    v.u.undef_name = name;
    return v;
}

struct jinja_value jv_undef_hint(const char *msg)
{
    struct jinja_value v = jv_undef(msg);
    v.flags = JV_F_HINT;
    return v;
}

struct jinja_value jv_none(void)
{
    struct jinja_value v = {.kind = JV_NONE};
    return v;
}

struct jinja_value jv_bool(bool b)
{
    struct jinja_value v = {.kind = JV_BOOL};
    v.u.b = b;
    return v;
}

struct jinja_value jv_int(int64_t i)
{
    struct jinja_value v = {.kind = JV_INT};
    v.u.i = i;
    return v;
}

struct jinja_value jv_float(double f)
{
    struct jinja_value v = {.kind = JV_FLOAT};
    v.u.f = f;
    return v;
}

struct jinja_value jv_str(const char *s, size_t n)
{
    struct jinja_value v = {.kind = JV_STR};
    v.u.s.s = s;
    v.u.s.n = n;
    return v;
}

struct jinja_value jv_strdup(struct jarena *a, const char *s, size_t n)
{
    return jv_str(ja_strndup(a, s, n), n);
}

struct jinja_value jv_list_new(struct jarena *a, size_t cap)
{
    struct jinja_value v = {.kind = JV_LIST};
    struct jv_list *l = ja_alloc(a, sizeof(*l));
    l->n = 0;
    l->cap = cap;
    l->v = cap ? ja_alloc(a, cap * sizeof(*l->v)) : NULL;
    v.u.list = l;
    return v;
}

struct jinja_value jv_dict_new(struct jarena *a, size_t cap)
{
    struct jinja_value v = {.kind = JV_DICT};
    struct jv_dict *d = ja_alloc(a, sizeof(*d));
    d->n = 0;
    d->cap = cap;
    d->k = cap ? ja_alloc(a, cap * sizeof(*d->k)) : NULL;
    d->v = cap ? ja_alloc(a, cap * sizeof(*d->v)) : NULL;
    v.u.dict = d;
    return v;
}

void jv_list_push(struct jarena *a, struct jv_list *l, struct jinja_value v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct jinja_value *nv = ja_alloc(a, cap * sizeof(*nv));
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof(*nv));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

struct jinja_value *jv_dict_find(const struct jv_dict *d, struct jinja_value key)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], key))
            return &d->v[i];
    return NULL;
}

struct jinja_value *jv_dict_get(const struct jv_dict *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == JV_STR && d->k[i].u.s.n == n && memcmp(d->k[i].u.s.s, key, n) == 0)
            return &d->v[i];
    return NULL;
}

void jv_dict_set(struct jarena *a, struct jv_dict *d, struct jinja_value k, struct jinja_value v)
{
    struct jinja_value *slot = jv_dict_find(d, k);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        struct jinja_value *nk = ja_alloc(a, cap * sizeof(*nk));
        struct jinja_value *nv = ja_alloc(a, cap * sizeof(*nv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(*nk));
            memcpy(nv, d->v, d->n * sizeof(*nv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

// ---- predicates ----

bool jv_truthy(struct jinja_value v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0.0;
    case JV_STR:
        return v.u.s.n > 0;
    case JV_LIST:
        return (v.flags & JV_F_GEN) || v.u.list->n > 0; /* a generator is always true */
    case JV_DICT:
        return v.u.dict->n > 0;
    default:
        return true;
    }
}

static bool is_num(struct jinja_value v)
{
    return v.kind == JV_BOOL || v.kind == JV_INT || v.kind == JV_FLOAT;
}

static double num_f(struct jinja_value v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}

bool jv_equal(struct jinja_value a, struct jinja_value b)
{
    if (is_num(a) && is_num(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
            int64_t x = a.kind == JV_INT ? a.u.i : a.u.b;
            int64_t y = b.kind == JV_INT ? b.u.i : b.u.b;
            return x == y;
        }
        return num_f(a) == num_f(b);
    }
    if (a.kind != b.kind)
        return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR:
    case JV_BIGINT:
        return a.u.s.n == b.u.s.n && (a.u.s.n == 0 || memcmp(a.u.s.s, b.u.s.s, a.u.s.n) == 0);
    case JV_LIST:
        if ((a.flags | b.flags) & JV_F_GEN)
            return a.u.list == b.u.list;
        if ((a.flags & (JV_F_TUPLE | JV_F_LAZY)) != (b.flags & (JV_F_TUPLE | JV_F_LAZY)) ||
            a.u.list->n != b.u.list->n)
            return false;
        for (size_t i = 0; i < a.u.list->n; i++)
            if (!jv_equal(a.u.list->v[i], b.u.list->v[i]))
                return false;
        return true;
    case JV_DICT:
        if (a.u.dict->n != b.u.dict->n)
            return false;
        for (size_t i = 0; i < a.u.dict->n; i++) {
            struct jinja_value *o = jv_dict_find(b.u.dict, a.u.dict->k[i]);
            if (!o || !jv_equal(a.u.dict->v[i], *o))
                return false;
        }
        return true;
    case JV_NS:
        return a.u.dict == b.u.dict;
    case JV_MACRO:
        return a.u.macro == b.u.macro;
    case JV_LOOP:
        return a.u.loop == b.u.loop;
    case JV_FUNC:
        return a.fn == b.fn && a.u.self == b.u.self;
    case JV_CALLER:
        return a.u.caller == b.u.caller;
    default:
        return false;
    }
}

bool jv_is_str(struct jinja_value v, const char *s)
{
    size_t n = strlen(s);
    return v.kind == JV_STR && v.u.s.n == n && memcmp(v.u.s.s, s, n) == 0;
}

const char *jv_type_name(struct jinja_value v)
{
    switch (v.kind) {
    case JV_UNDEF:
        return "Undefined";
    case JV_NONE:
        return "NoneType";
    case JV_BOOL:
        return "bool";
    case JV_INT:
    case JV_BIGINT:
        return "int";
    case JV_FLOAT:
        return "float";
    case JV_STR:
        return (v.flags & JV_F_SAFE) ? "Markup" : "str";
    case JV_LIST:
        return (v.flags & JV_F_GEN)      ? "generator"
               : (v.flags & JV_F_KEYS)   ? "dict_keys"
               : (v.flags & JV_F_VALUES) ? "dict_values"
               : (v.flags & JV_F_ITEMS)  ? "dict_items"
               : (v.flags & JV_F_TUPLE)  ? "tuple"
                                         : "list";
    case JV_DICT:
        return "dict";
    case JV_NS:
        return "Namespace";
    case JV_MACRO:
        return "Macro";
    case JV_LOOP:
        return "LoopContext";
    case JV_CALLER:
        return "Macro";
    default:
        return "builtin_function_or_method";
    }
}

// ---- utf-8 ----

size_t utf8_next(const char *s, size_t n, size_t i)
{
    i++;
    while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
        i++;
    return i;
}

size_t utf8_len(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

uint32_t utf8_decode(const char *s, size_t n, size_t i)
{
    const unsigned char *p = (const unsigned char *)s + i;
    size_t left = n - i;
    if (p[0] < 0x80)
        return p[0];
    if ((p[0] & 0xE0) == 0xC0 && left >= 2)
        return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    if ((p[0] & 0xF0) == 0xE0 && left >= 3)
        return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    if ((p[0] & 0xF8) == 0xF0 && left >= 4)
        return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
               ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    return 0xFFFD;
}

size_t utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t utf8_offsets(struct jarena *a, const char *s, size_t n, size_t **offs)
{
    size_t count = utf8_len(s, n);
    size_t *o = ja_alloc(a, (count + 1) * sizeof(*o));
    size_t k = 0;
    for (size_t i = 0; i < n; i = utf8_next(s, n, i))
        o[k++] = i;
    o[k] = n;
    *offs = o;
    return count;
}

bool py_isspace(uint32_t cp)
{
    if (cp < 0x80)
        return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// ---- str() and repr() ----

void jv_float_repr(struct buf *b, double f)
{
    if (isnan(f)) {
        buf_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        buf_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX: split into sign, digits and exponent */
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[32];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (neg)
        buf_putc(b, '-');
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            buf_puts(b, "0.");
            for (int i = 0; i < -exp - 1; i++)
                buf_putc(b, '0');
            buf_append(b, digits, (size_t)nd);
        } else if (nd <= exp + 1) {
            buf_append(b, digits, (size_t)nd);
            for (int i = nd; i < exp + 1; i++)
                buf_putc(b, '0');
            buf_puts(b, ".0");
        } else {
            buf_append(b, digits, (size_t)exp + 1);
            buf_putc(b, '.');
            buf_append(b, digits + exp + 1, (size_t)(nd - exp - 1));
        }
    } else {
        buf_putc(b, digits[0]);
        if (nd > 1) {
            buf_putc(b, '.');
            buf_append(b, digits + 1, (size_t)nd - 1);
        }
        buf_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static bool py_isprintable(uint32_t cp)
{
    if (cp == ' ')
        return true;
    if (cp < 0x20 || cp == 0x7F)
        return false;
    if (cp < 0x7F)
        return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
        return false;
    default:
        return true;
    }
}

static void str_repr(struct buf *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    buf_putc(b, q);
    for (size_t i = 0; i < n;) {
        /* a run of plain printable ASCII in one copy (per-character appends made reprs of big
         * strings slow enough to hit fuzz_jinja's timeout) */
        size_t r = i;
        while (r < n && (unsigned char)s[r] >= 0x20 && (unsigned char)s[r] < 0x7f && s[r] != q &&
               s[r] != '\\')
            r++;
        if (r > i) {
            buf_append(b, s + i, r - i);
            i = r;
            continue;
        }
        size_t j = utf8_next(s, n, i);
        uint32_t cp = utf8_decode(s, n, i);
        if (cp == (uint32_t)q || cp == '\\') {
            buf_putc(b, '\\');
            buf_putc(b, (char)cp);
        } else if (cp == '\n') {
            buf_puts(b, "\\n");
        } else if (cp == '\r') {
            buf_puts(b, "\\r");
        } else if (cp == '\t') {
            buf_puts(b, "\\t");
        } else if (!py_isprintable(cp)) {
            if (cp < 0x100)
                buf_printf(b, "\\x%02x", cp);
            else if (cp < 0x10000)
                buf_printf(b, "\\u%04x", cp);
            else
                buf_printf(b, "\\U%08x", cp);
        } else {
            buf_append(b, s + i, j - i);
        }
        i = j;
    }
    buf_putc(b, q);
}

void jv_repr(struct buf *b, struct jinja_value v)
{
    switch (v.kind) {
    case JV_UNDEF:
        buf_puts(b, "Undefined");
        return;
    case JV_STR:
        if (v.flags & JV_F_SAFE) {
            buf_puts(b, "Markup(");
            str_repr(b, v.u.s.s, v.u.s.n);
            buf_putc(b, ')');
        } else {
            str_repr(b, v.u.s.s, v.u.s.n);
        }
        return;
    case JV_LIST: {
        if (v.flags & JV_F_GEN) { /* Python prints an address here: callers refuse to print it */
            buf_puts(b, "<generator object>");
            return;
        }
        if (v.flags & (JV_F_KEYS | JV_F_VALUES | JV_F_ITEMS)) {
            struct jinja_value l = v;
            l.flags = 0;
            buf_printf(b, "%s(", jv_type_name(v));
            jv_repr(b, l);
            buf_putc(b, ')');
            return;
        }
        bool tup = v.flags & JV_F_TUPLE;
        buf_putc(b, tup ? '(' : '[');
        for (size_t i = 0; i < v.u.list->n; i++) {
            if (i)
                buf_puts(b, ", ");
            jv_repr(b, v.u.list->v[i]);
        }
        if (tup && v.u.list->n == 1)
            buf_putc(b, ',');
        buf_putc(b, tup ? ')' : ']');
        return;
    }
    case JV_DICT:
        buf_putc(b, '{');
        for (size_t i = 0; i < v.u.dict->n; i++) {
            if (i)
                buf_puts(b, ", ");
            jv_repr(b, v.u.dict->k[i]);
            buf_puts(b, ": ");
            jv_repr(b, v.u.dict->v[i]);
        }
        buf_putc(b, '}');
        return;
    default:
        jv_to_str(b, v);
    }
}

void jv_to_str(struct buf *b, struct jinja_value v)
{
    switch (v.kind) {
    case JV_UNDEF:
        return;
    case JV_NONE:
        buf_puts(b, "None");
        return;
    case JV_BOOL:
        buf_puts(b, v.u.b ? "True" : "False");
        return;
    case JV_INT:
        buf_printf(b, "%lld", (long long)v.u.i);
        return;
    case JV_FLOAT:
        jv_float_repr(b, v.u.f);
        return;
    case JV_STR:
    case JV_BIGINT:
        buf_append(b, v.u.s.s, v.u.s.n);
        return;
    case JV_LIST:
    case JV_DICT:
        jv_repr(b, v);
        return;
    case JV_NS: {
        struct jinja_value d = v;
        d.kind = JV_DICT;
        buf_puts(b, "<Namespace ");
        jv_repr(b, d);
        buf_putc(b, '>');
        return;
    }
    case JV_MACRO:
        buf_printf(b, "<Macro '%s'>", v.u.macro->name);
        return;
    case JV_LOOP:
        buf_printf(b, "<LoopContext %zu/%zu>", v.u.loop->i + 1, v.u.loop->items->n);
        return;
    default:
        buf_puts(b, "<built-in function>");
        return;
    }
}

struct jinja_value jv_stringify(struct jarena *a, struct jinja_value v)
{
    if (v.kind == JV_STR)
        return v;
    struct buf b = {0};
    jv_to_str(&b, v);
    struct jinja_value r = jv_strdup(a, b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return r;
}
