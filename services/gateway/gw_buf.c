/* gw_buf: growable byte buffer on xrealloc (small, bounded by our limits). */
#include "gw_buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

void gw_buf_init(struct gw_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void gw_buf_deinit(struct gw_buf *b)
{
    free(b->data);
    gw_buf_init(b);
}

void gw_buf_reset(struct gw_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static void reserve(struct gw_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void gw_buf_append(struct gw_buf *b, const void *p, size_t n)
{
    reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void gw_buf_puts(struct gw_buf *b, const char *s)
{
    gw_buf_append(b, s, strlen(s));
}

void gw_buf_printf(struct gw_buf *b, const char *fmt, ...)
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

char *gw_buf_take(struct gw_buf *b, size_t *len)
{
    if (!b->data)
        reserve(b, 0);
    char *p = b->data;
    if (len)
        *len = b->len;
    gw_buf_init(b);
    return p;
}
