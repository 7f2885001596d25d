/* jbuf: the growable NUL-terminated text buffer of the text library (template output, parser
 * pending input and event text). Grows by doubling from 256 bytes on xrealloc. */
#include "jbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

static void jbuf_reserve(struct jbuf *b, size_t extra)
{
    if (b->n + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1)
        cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

void jbuf_put(struct jbuf *b, const char *s, size_t n)
{
    jbuf_reserve(b, n);
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jbuf_puts(struct jbuf *b, const char *s)
{
    jbuf_put(b, s, strlen(s));
}

void jbuf_putc(struct jbuf *b, char c)
{
    jbuf_put(b, &c, 1);
}

void jbuf_printf(struct jbuf *b, const char *fmt, ...)
{
    /* format into a small stack buffer first (most calls fit; gcc's -Wformat-truncation
     * also flags a vsnprintf(NULL, 0, ...) size probe under -fsanitize=undefined); a longer
     * result is formatted again straight into the reserved space */
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    jbuf_reserve(b, (size_t)n);
    if ((size_t)n < sizeof(tmp)) {
        memcpy(b->p + b->n, tmp, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        int m = vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
        va_end(ap);
        if (m != n) { /* cannot happen with the same arguments; keep the buffer consistent */
            b->p[b->n] = '\0';
            return;
        }
    }
    b->n += (size_t)n;
}

void jbuf_consume(struct jbuf *b, size_t n)
{
    if (!n)
        return;
    memmove(b->p, b->p + n, b->n - n);
    b->n -= n;
    b->p[b->n] = 0;
}

size_t jbuf_partial_tag(const struct jbuf *b, const char *tag)
{
    size_t tl = strlen(tag);
    size_t k = tl - 1 < b->n ? tl - 1 : b->n;
    for (; k > 0; k--)
        if (memcmp(b->p + b->n - k, tag, k) == 0)
            return k;
    return 0;
}

void jbuf_free(struct jbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
