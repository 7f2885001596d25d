/* tokenizer_utf8: the UTF-8 pieces of the tokenizer — GPT-2 byte<->unicode map, WHATWG UTF-8
 * repair (what a JS TextDecoder with fatal=false does), JS whitespace, and the translation of the
 * tokenizer.json split regex into a PCRE2 pattern with JavaScript semantics. */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "text/tokenizer.h"
#include "tokenizer_internal.h"

// ---- byte-level map ----

/* Printable bytes map to themselves; the other 68 bytes map to 256.. in byte order. */
static bool byte_is_printable(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

uint32_t tok_byte_to_cp(uint8_t b)
{
    if (byte_is_printable(b))
        return b;
    unsigned n = 0;
    for (unsigned i = 0; i < b; i++)
        if (!byte_is_printable(i))
            n++;
    return 256 + n;
}

int tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return byte_is_printable(cp) ? (int)cp : -1;
    /* the k-th non-printable byte: 0..32, then 127..160, then 173 */
    uint32_t k = cp - 256;
    if (k <= 32)
        return (int)k;
    if (k <= 66)
        return (int)(127 + k - 33);
    if (k == 67)
        return 173;
    return -1;
}

size_t tok_utf8_next(const char *s, size_t len, uint32_t *cp)
{
    const uint8_t *u = (const uint8_t *)s;
    if (u[0] < 0x80 || len < 2) {
        *cp = u[0];
        return 1;
    }
    if (u[0] < 0xE0) {
        *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
        return 2;
    }
    if (u[0] < 0xF0 || len < 4) {
        *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
          ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    return 4;
}

size_t tok_utf8_put(char *out, uint32_t cp)
{
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

// ---- WHATWG UTF-8 decoder (Encoding Standard §4.1 "UTF-8 decoder"), byte preserving ----

size_t tokenizer_utf8_repair(const char *in, size_t len, bool final, char *out, size_t *consumed)
{
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    const uint8_t *u = (const uint8_t *)in;
    size_t o = 0, i = 0;
    while (i < len) {
        uint8_t b = u[i];
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (b < 0x80) {
            if (out)
                out[o] = (char)b;
            o++;
            i++;
            continue;
        }
        if (b >= 0xC2 && b <= 0xDF) {
            need = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            if (b == 0xE0)
                lo = 0xA0;
            if (b == 0xED)
                hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            if (b == 0xF0)
                lo = 0x90;
            if (b == 0xF4)
                hi = 0x8F;
        } else {
            if (out)
                memcpy(out + o, fffd, 3);
            o += 3;
            i++;
            continue;
        }
        size_t seen = 0;
        while (seen < need && i + 1 + seen < len) {
            uint8_t c = u[i + 1 + seen];
            if (c < lo || c > hi)
                break;
            lo = 0x80;
            hi = 0xBF;
            seen++;
        }
        if (seen == need) {
            if (out)
                memcpy(out + o, in + i, need + 1);
            o += need + 1;
            i += need + 1;
        } else if (i + 1 + seen == len && !final) {
            break; /* incomplete but valid so far: wait for more bytes */
        } else {
            /* the lead byte and the valid continuations seen form one maximal subpart */
            if (out)
                memcpy(out + o, fffd, 3);
            o += 3;
            i += 1 + seen;
        }
    }
    if (consumed)
        *consumed = i;
    return o;
}

bool tok_utf8_valid(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        uint8_t b = u[i], lo = 0x80, hi = 0xBF;
        size_t need;
        if (b >= 0xC2 && b <= 0xDF)
            need = 1;
        else if (b >= 0xE0 && b <= 0xEF)
            need = 2;
        else if (b >= 0xF0 && b <= 0xF4)
            need = 3;
        else
            return false;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
        else if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
        if (i + need >= n)
            return false; /* truncated */
        for (size_t k = 1; k <= need; k++) {
            uint8_t c = u[i + k];
            if (c < lo || c > hi)
                return false;
            lo = 0x80;
            hi = 0xBF;
        }
        i += need + 1;
    }
    return true;
}

// ---- JavaScript whitespace ----

bool tok_is_js_space(uint32_t cp)
{
    switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

// ---- regex translation ----

/* The members of JavaScript's \s (WhiteSpace + LineTerminator, Unicode 15 Zs), for a PCRE2 class.
 */
#define JS_SPACE_SET                                                                               \
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"                    \
    "\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

struct sbuf {
    char *p;
    size_t n, cap;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* Copy one escape starting at p[0] == '\\' (\p{..}, \x{..}, or backslash + one code point);
 * returns its length. */
static size_t escape_len(const char *p)
{
    if (p[1] == '\0')
        return 1;
    if ((p[1] == 'p' || p[1] == 'P' || p[1] == 'x') && p[2] == '{') {
        const char *e = strchr(p + 3, '}');
        if (e)
            return (size_t)(e - p) + 1;
    }
    size_t n = 2;
    while (((uint8_t)p[n] & 0xC0) == 0x80)
        n++;
    return n;
}

char *tok_regex_translate(const char *pat)
{
    struct sbuf b = {0};
    bool ci_stack[64]; /* per open group: case-insensitive (ASCII) */
    int depth = 0;
    bool ci = false, in_class = false;
    sb_puts(&b, "");
    for (const char *p = pat; *p;) {
        if (*p == '\\') {
            size_t n = escape_len(p);
            if (n == 2 && p[1] == 's')
                sb_puts(&b, in_class ? JS_SPACE_SET : "[" JS_SPACE_SET "]");
            else if (n == 2 && p[1] == 'S' && !in_class)
                sb_puts(&b, "[^" JS_SPACE_SET "]");
            else
                sb_put(&b, p, n);
            p += n;
            continue;
        }
        if (in_class) {
            if (*p == ']')
                in_class = false;
            sb_put(&b, p, 1);
            p++;
            continue;
        }
        if (*p == '[') {
            in_class = true;
            sb_put(&b, p, 1);
            p++;
            if (*p == '^') {
                sb_put(&b, p, 1);
                p++;
            }
            if (*p == ']') { /* a leading ']' is literal */
                sb_put(&b, p, 1);
                p++;
            }
            continue;
        }
        if (*p == '(') {
            if (depth >= (int)ARRAY_LEN(ci_stack))
                goto fail;
            ci_stack[depth++] = ci;
            if (strncmp(p, "(?i:", 4) == 0) {
                ci = true;
                sb_puts(&b, "(?:");
                p += 4;
                continue;
            }
            sb_put(&b, p, 1);
            p++;
            continue;
        }
        if (*p == ')') {
            if (depth == 0)
                goto fail;
            ci = ci_stack[--depth];
            sb_put(&b, p, 1);
            p++;
            continue;
        }
        if (ci && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
            char cls[5] = {'[', (char)(*p | 0x20), (char)(*p & ~0x20), ']', '\0'};
            sb_puts(&b, cls);
            p++;
            continue;
        }
        sb_put(&b, p, 1);
        p++;
    }
    return b.p;
fail:
    free(b.p);
    return NULL;
}
