/* jinja lexer: splits a template into data and tag tokens. Whitespace handling follows jinja2's
 * lexer with trim_blocks and lstrip_blocks on: newlines are normalised to \n and one trailing
 * newline is dropped; `%}`/`#}` eat one following newline; a block or comment tag alone on its
 * line loses its indentation; `-` strips all whitespace on that side, `+` disables lstrip/trim. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "jinja_lex.h"

struct lx {
    struct jarena *a;
    const char *s; // normalised source
    size_t n, i;
    int line;
    bool line_starting; // the previous match ended with a newline
    struct jtokens *t;
    struct jinja_error *err;
};

static int lx_fail(struct lx *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int lx_fail(struct lx *l, const char *fmt, ...)
{
    l->err->line = l->line;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(l->err->msg, sizeof(l->err->msg), "chat template line %d: %s", l->line, what);
    return ERR_INVAL;
}

static struct jtoken *lx_push(struct lx *l, enum jtok type)
{
    struct jtokens *t = l->t;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->v = xrealloc(t->v, t->cap * sizeof(*t->v));
    }
    struct jtoken *k = &t->v[t->n++];
    memset(k, 0, sizeof(*k));
    k->type = (uint8_t)type;
    k->line = l->line;
    return k;
}

static void count_lines(struct lx *l, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (l->s[i] == '\n')
            l->line++;
}

/* Length of the Python-whitespace suffix of s[0..n). */
static size_t ws_suffix(const char *s, size_t n)
{
    size_t end = n;
    while (end > 0) {
        size_t st = end - 1;
        while (st > 0 && ((unsigned char)s[st] & 0xC0) == 0x80)
            st--;
        if (!py_isspace(utf8_decode(s, n, st)))
            break;
        end = st;
    }
    return n - end;
}

/* Decode a Python string literal body with 'unicode-escape' rules. */
static struct jinja_value decode_string(struct jarena *a, const char *s, size_t n)
{
    struct buf b = {0};
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) {
            buf_putc(&b, c);
            continue;
        }
        char e = s[++i];
        uint32_t cp = 0;
        int nhex = 0;
        switch (e) {
        case '\n':
            break;
        case '\\':
        case '\'':
        case '"':
            buf_putc(&b, e);
            break;
        case 'a':
            buf_putc(&b, '\a');
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
        case 'v':
            buf_putc(&b, '\v');
            break;
        case 'x':
            nhex = 2;
            break;
        case 'u':
            nhex = 4;
            break;
        case 'U':
            nhex = 8;
            break;
        default:
            if (e >= '0' && e <= '7') {
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') {
                    cp = cp * 8 + (uint32_t)(s[i] - '0');
                    i++;
                    k++;
                }
                i--;
                char u[4];
                buf_append(&b, u, utf8_encode(cp, u));
            } else {
                buf_putc(&b, '\\');
                buf_putc(&b, e);
            }
        }
        if (nhex) {
            int k;
            for (k = 0; k < nhex && i + 1 < n; k++) {
                char h = s[i + 1];
                uint32_t d;
                if (h >= '0' && h <= '9')
                    d = (uint32_t)(h - '0');
                else if (h >= 'a' && h <= 'f')
                    d = (uint32_t)(h - 'a' + 10);
                else if (h >= 'A' && h <= 'F')
                    d = (uint32_t)(h - 'A' + 10);
                else
                    break;
                cp = cp * 16 + d;
                i++;
            }
            if (k == nhex) {
                char u[4];
                buf_append(&b, u, utf8_encode(cp, u));
            } else { /* Python raises; keep the text so the output is at least visible */
                buf_putc(&b, '\\');
                buf_putc(&b, e);
            }
        }
    }
    struct jinja_value v = jv_strdup(a, b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return v;
}

static bool is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static const struct {
    const char *s;
    enum jop op;
} OPS[] = {
    {"//", JOP_FLOORDIV}, {"**", JOP_POW},      {"==", JOP_EQ},      {"!=", JOP_NE},
    {"<=", JOP_LE},       {">=", JOP_GE},       {"+", JOP_ADD},      {"-", JOP_SUB},
    {"*", JOP_MUL},       {"/", JOP_DIV},       {"%", JOP_MOD},      {"~", JOP_TILDE},
    {"<", JOP_LT},        {">", JOP_GT},        {"=", JOP_ASSIGN},   {".", JOP_DOT},
    {",", JOP_COMMA},     {":", JOP_COLON},     {"|", JOP_PIPE},     {"(", JOP_LPAREN},
    {")", JOP_RPAREN},    {"[", JOP_LBRACKET},  {"]", JOP_RBRACKET}, {"{", JOP_LBRACE},
    {"}", JOP_RBRACE},    {";", JOP_SEMICOLON},
};

/* Tokens inside {{ }} or {% %} up to and including the closing tag. */
static int lex_tag(struct lx *l, bool is_block)
{
    int depth = 0;
    for (;;) {
        while (l->i < l->n && (l->s[l->i] == ' ' || l->s[l->i] == '\t' || l->s[l->i] == '\n' ||
                               l->s[l->i] == '\r' || l->s[l->i] == '\f' || l->s[l->i] == '\v')) {
            if (l->s[l->i] == '\n')
                l->line++;
            l->i++;
        }
        if (l->i >= l->n)
            return lx_fail(l, "unexpected end of template inside a %s tag",
                           is_block ? "{% %}" : "{{ }}");
        const char *p = l->s + l->i;
        size_t left = l->n - l->i;
        if (depth == 0) {
            const char *close = is_block ? "%}" : "}}";
            if (left >= 3 && p[0] == '-' && p[1] == close[0] && p[2] == close[1]) {
                lx_push(l, is_block ? JT_BLOCK_END : JT_VAR_END);
                l->i += 3;
                size_t st = l->i;
                while (l->i < l->n) { /* \s* */
                    size_t nx = utf8_next(l->s, l->n, l->i);
                    if (!py_isspace(utf8_decode(l->s, l->n, l->i)))
                        break;
                    l->i = nx;
                }
                count_lines(l, st, l->i);
                l->line_starting = l->i > st ? l->s[l->i - 1] == '\n' : false;
                return 0;
            }
            if (is_block && left >= 3 && p[0] == '+' && p[1] == '%' && p[2] == '}') {
                lx_push(l, JT_BLOCK_END);
                l->i += 3;
                l->line_starting = false;
                return 0;
            }
            if (left >= 2 && p[0] == close[0] && p[1] == close[1]) {
                lx_push(l, is_block ? JT_BLOCK_END : JT_VAR_END);
                l->i += 2;
                l->line_starting = false;
                if (is_block && l->i < l->n && l->s[l->i] == '\n') { /* trim_blocks */
                    l->i++;
                    l->line++;
                    l->line_starting = true;
                }
                return 0;
            }
        }
        char c = p[0];
        if (is_ident_start(c)) {
            size_t k = 1;
            while (k < left && (is_ident_start(p[k]) || is_digit(p[k])))
                k++;
            struct jtoken *t = lx_push(l, JT_NAME);
            t->s = ja_strndup(l->a, p, k);
            t->n = k;
            l->i += k;
            continue;
        }
        if (is_digit(c)) {
            size_t k = 0;
            bool is_float = false;
            while (k < left &&
                   (is_digit(p[k]) || (p[k] == '_' && k + 1 < left && is_digit(p[k + 1]))))
                k++;
            if (k + 1 < left && p[k] == '.' && is_digit(p[k + 1])) {
                is_float = true;
                k++;
                while (k < left && (is_digit(p[k]) || p[k] == '_'))
                    k++;
            }
            if (k < left && (p[k] == 'e' || p[k] == 'E')) {
                size_t e = k + 1;
                if (e < left && (p[e] == '+' || p[e] == '-'))
                    e++;
                if (e < left && is_digit(p[e])) {
                    is_float = true;
                    k = e;
                    while (k < left && is_digit(p[k]))
                        k++;
                }
            }
            char tmp[128];
            size_t m = 0;
            for (size_t j = 0; j < k && m + 1 < sizeof(tmp); j++)
                if (p[j] != '_')
                    tmp[m++] = p[j];
            tmp[m] = 0;
            struct jtoken *t = lx_push(l, is_float ? JT_FLOAT : JT_INT);
            t->val = is_float ? jv_float(strtod(tmp, NULL)) : jv_int(strtoll(tmp, NULL, 10));
            l->i += k;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t k = 1;
            while (k < left && p[k] != c) {
                if (p[k] == '\\' && k + 1 < left)
                    k++;
                k++;
            }
            if (k >= left)
                return lx_fail(l, "unterminated string");
            struct jtoken *t = lx_push(l, JT_STRING);
            t->val = decode_string(l->a, p + 1, k - 1);
            count_lines(l, l->i, l->i + k);
            l->i += k + 1;
            continue;
        }
        size_t j;
        for (j = 0; j < ARRAY_LEN(OPS); j++) {
            size_t on = strlen(OPS[j].s);
            if (left >= on && memcmp(p, OPS[j].s, on) == 0)
                break;
        }
        if (j == ARRAY_LEN(OPS)) {
            char ch[2] = {c, 0};
            return lx_fail(l, "unexpected character '%s'", ch);
        }
        struct jtoken *t = lx_push(l, JT_OP);
        t->op = (uint8_t)OPS[j].op;
        if (OPS[j].op == JOP_LPAREN || OPS[j].op == JOP_LBRACKET || OPS[j].op == JOP_LBRACE)
            depth++;
        else if ((OPS[j].op == JOP_RPAREN || OPS[j].op == JOP_RBRACKET ||
                  OPS[j].op == JOP_RBRACE) &&
                 depth > 0)
            depth--;
        l->i += strlen(OPS[j].s);
    }
}

/* Find the next tag start at or after l->i: returns its offset (n when none) and the kind. */
static size_t find_tag(const struct lx *l, char *kind)
{
    for (size_t i = l->i; i + 1 < l->n; i++) {
        if (l->s[i] == '{' && (l->s[i + 1] == '{' || l->s[i + 1] == '%' || l->s[i + 1] == '#')) {
            *kind = l->s[i + 1];
            return i;
        }
    }
    return l->n;
}

/* Length of text[0..tn) once the whitespace rules for a following tag are applied: `-` strips
 * all trailing whitespace; otherwise, for block/comment tags (lstrip), the indentation before the
 * tag goes when only whitespace precedes it on its line. */
static size_t strip_before(const struct lx *l, const char *text, size_t tn, char sign, bool lstrip)
{
    if (sign == '-')
        return tn - ws_suffix(text, tn);
    if (sign == '+' || !lstrip)
        return tn;
    size_t lpos = 0;
    for (size_t k = tn; k > 0; k--)
        if (text[k - 1] == '\n') {
            lpos = k;
            break;
        }
    if (lpos == 0 && !l->line_starting)
        return tn;
    if (lpos >= tn)
        return tn;
    for (size_t k = lpos; k < tn; k++)
        if (!(text[k] == ' ' || text[k] == '\t' || text[k] == '\f' || text[k] == '\v' ||
              text[k] == '\r'))
            return tn;
    return lpos;
}

/* After `{%` and its sign: skip spaces, match word, skip spaces; returns the offset or 0. */
static size_t match_word(const struct lx *l, size_t i, const char *word)
{
    size_t wn = strlen(word);
    while (i < l->n && (l->s[i] == ' ' || l->s[i] == '\t' || l->s[i] == '\n'))
        i++;
    if (l->n - i < wn || memcmp(l->s + i, word, wn) != 0)
        return 0;
    i += wn;
    size_t j = i;
    while (j < l->n && (l->s[j] == ' ' || l->s[j] == '\t' || l->s[j] == '\n'))
        j++;
    if (j == i && !(j < l->n && (l->s[j] == '-' || l->s[j] == '+' || l->s[j] == '%')))
        return 0; /* rawx */
    return j;
}

/* End of a block tag at i (`-%}`, `+%}` or `%}`), applying trim rules; returns the offset after
 * it and sets *end_sign, or 0 when there is none. plus_ok: `+%}` accepted. */
static size_t tag_close(struct lx *l, size_t i, bool plus_ok)
{
    if (l->n - i >= 3 && l->s[i] == '-' && l->s[i + 1] == '%' && l->s[i + 2] == '}') {
        i += 3;
        while (i < l->n && py_isspace(utf8_decode(l->s, l->n, i)))
            i = utf8_next(l->s, l->n, i);
        return i;
    }
    if (plus_ok && l->n - i >= 3 && l->s[i] == '+' && l->s[i + 1] == '%' && l->s[i + 2] == '}')
        return i + 3;
    if (l->n - i >= 2 && l->s[i] == '%' && l->s[i + 1] == '}')
        return i + 2;
    return 0;
}

/* {% raw %}...{% endraw %}: the body is data. raw's own `%}` keeps the newline after it (jinja2
 * applies trim_blocks to endraw only). Returns 1 when handled, 0 when this is not raw. */
static int lex_raw(struct lx *l)
{
    size_t i = match_word(l, l->i, "raw");
    if (!i)
        return 0;
    size_t body = tag_close(l, i, false);
    if (!body)
        return 0;
    if (l->s[i] == '%' && body > 0) /* plain %}: no trim_blocks after raw */
        body = i + 2;
    count_lines(l, l->i, body);
    l->line_starting = body > 0 && l->s[body - 1] == '\n';
    for (size_t k = body; k + 1 < l->n; k++) {
        if (l->s[k] != '{' || l->s[k + 1] != '%')
            continue;
        size_t j = k + 2;
        char sign = 0;
        if (j < l->n && (l->s[j] == '-' || l->s[j] == '+'))
            sign = l->s[j++];
        size_t e = match_word(l, j, "endraw");
        if (!e)
            continue;
        size_t after = tag_close(l, e, true);
        if (!after)
            continue;
        size_t tn = strip_before(l, l->s + body, k - body, sign, true);
        if (tn > 0) {
            struct jtoken *t = lx_push(l, JT_DATA);
            t->val = jv_strdup(l->a, l->s + body, tn);
        }
        if (l->s[e] == '%' && after < l->n && l->s[after] == '\n') /* trim_blocks */
            after++;
        count_lines(l, body, after);
        l->line_starting = l->s[after - 1] == '\n';
        l->i = after;
        return 1;
    }
    return lx_fail(l, "missing end of raw directive");
}

static int lex_all(struct lx *l)
{
    while (l->i < l->n) {
        char kind = 0;
        size_t at = find_tag(l, &kind);
        size_t text_end = at;
        char sign = 0;
        if (at < l->n && at + 2 < l->n && (l->s[at + 2] == '-' || l->s[at + 2] == '+'))
            sign = l->s[at + 2];
        const char *text = l->s + l->i;
        size_t tn = text_end - l->i;
        if (at < l->n)
            tn = strip_before(l, text, tn, sign, kind != '{');
        if (tn > 0) {
            struct jtoken *t = lx_push(l, JT_DATA);
            t->val = jv_strdup(l->a, text, tn);
        }
        count_lines(l, l->i, text_end);
        if (at >= l->n) {
            l->i = l->n;
            break;
        }
        l->i = at + 2 + (sign ? 1 : 0);
        l->line_starting = false;
        if (kind == '#') {
            /* comment: up to `#}` (eats one newline) or `-#}` (eats all whitespace) */
            size_t k = l->i;
            while (k + 1 < l->n && !(l->s[k] == '#' && l->s[k + 1] == '}'))
                k++;
            if (k + 1 >= l->n)
                return lx_fail(l, "unterminated comment");
            bool minus = k > l->i && l->s[k - 1] == '-';
            count_lines(l, l->i, k);
            l->i = k + 2;
            size_t st = l->i;
            if (minus) {
                while (l->i < l->n && py_isspace(utf8_decode(l->s, l->n, l->i)))
                    l->i = utf8_next(l->s, l->n, l->i);
            } else if (l->i < l->n && l->s[l->i] == '\n') {
                l->i++;
            }
            count_lines(l, st, l->i);
            l->line_starting = l->i > st && l->s[l->i - 1] == '\n';
            continue;
        }
        if (kind == '%') {
            int raw = lex_raw(l);
            if (raw < 0)
                return raw;
            if (raw)
                continue;
        }
        lx_push(l, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN);
        int rc = lex_tag(l, kind == '%');
        if (rc < 0)
            return rc;
    }
    lx_push(l, JT_EOF);
    return 0;
}

int jinja_lex(struct jarena *a, const char *src, size_t len, struct jtokens *toks,
              struct jinja_error *err)
{
    /* normalise \r\n and \r to \n, drop one trailing newline */
    char *s = ja_alloc(a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n > 0 && s[n - 1] == '\n')
        n--;
    s[n] = 0;
    struct lx l = {
        .a = a, .s = s, .n = n, .i = 0, .line = 1, .line_starting = true, .t = toks, .err = err};
    return lex_all(&l);
}
