/* gw_buf: a growable byte buffer (response bodies, SSE frames). Owns its bytes. */
#ifndef GW_BUF_H
#define GW_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct gw_buf {
    char *data; /* NUL-terminated when len < cap */
    size_t len; /* bytes used */
    size_t cap; /* bytes allocated */
};

void gw_buf_init(struct gw_buf *b);
void gw_buf_deinit(struct gw_buf *b);
void gw_buf_reset(struct gw_buf *b);
void gw_buf_append(struct gw_buf *b, const void *p, size_t n);
void gw_buf_puts(struct gw_buf *b, const char *s);
void gw_buf_printf(struct gw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the bytes to the caller (free() them); the buffer is left empty. */
char *gw_buf_take(struct gw_buf *b, size_t *len);

#endif
