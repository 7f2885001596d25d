/* buf: the growable byte buffer (common/include/common/buf.h). Grows by doubling from 256 bytes
 * and keeps one byte past len for the NUL. */
#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

static void reserve(struct buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void buf_init(struct buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void buf_deinit(struct buf *b)
{
    free(b->data);
    buf_init(b);
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void buf_append(struct buf *b, const void *p, size_t n)
{
    reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void buf_putc(struct buf *b, char c)
{
    buf_append(b, &c, 1);
}

void buf_printf(struct buf *b, const char *fmt, ...)
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
    reserve(b, (size_t)n);
    if ((size_t)n < sizeof(tmp)) {
        memcpy(b->data + b->len, tmp, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        int m = vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        if (m != n) { /* cannot happen with the same arguments; keep the buffer consistent */
            b->data[b->len] = '\0';
            return;
        }
    }
    b->len += (size_t)n;
}

void buf_consume(struct buf *b, size_t n)
{
    if (!n)
        return;
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

size_t buf_match_tail(const struct buf *b, const char *tag)
{
    size_t tl = strlen(tag);
    size_t k = tl - 1 < b->len ? tl - 1 : b->len;
    for (; k > 0; k--)
        if (memcmp(b->data + b->len - k, tag, k) == 0)
            return k;
    return 0;
}
