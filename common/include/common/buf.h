/* buf: a growable byte buffer on xrealloc, NUL-terminated once anything was put, so text in it
 * reads as a C string (template output, parser input held back, response bodies, SSE frames).
 * A zeroed struct (or buf_init) is empty. It aborts on OOM: the sizes are bounded by our own
 * limits, callers that take outside input check those before they append. */
#ifndef COMMON_BUF_H
#define COMMON_BUF_H

#include <stddef.h>

struct buf {
    char *data; // xrealloc'd, NUL-terminated when cap > 0; NULL while nothing was put
    size_t len; // bytes used (the NUL not counted)
    size_t cap; // bytes allocated
};

/* An empty buffer (the same as a zeroed struct). */
void buf_init(struct buf *b);
/* Frees the bytes; the buffer is empty and reusable after. */
void buf_deinit(struct buf *b);
/* Empties the buffer and keeps the allocation. */
void buf_reset(struct buf *b);
/* Appends n bytes of p (n may be 0: the buffer is then allocated and terminated). */
void buf_append(struct buf *b, const void *p, size_t n);
void buf_puts(struct buf *b, const char *s);
void buf_putc(struct buf *b, char c);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n (<= b->len) bytes, moving the rest to the front. */
void buf_consume(struct buf *b, size_t n);
/* Length of the longest tail of b that is a proper prefix of tag: the bytes a streaming parser
 * holds back because they may be the start of tag. */
size_t buf_match_tail(const struct buf *b, const char *tag);

#endif
