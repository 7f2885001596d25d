/* jbuf: a growable byte buffer, always NUL-terminated once anything was put (text-library
 * internal: templates, the reasoning and tool-call parsers). A zeroed struct is empty; the
 * functions abort on OOM (xrealloc): the sizes are bounded by our own inputs. */
#ifndef TEXT_JBUF_H
#define TEXT_JBUF_H

#include <stddef.h>

struct jbuf {
    char *p;    // malloc'd (xrealloc), NUL-terminated when cap > 0
    size_t n;   // bytes used
    size_t cap; // bytes allocated
};

/* Append n bytes of s (n may be 0: the buffer is then allocated and terminated). */
void jbuf_put(struct jbuf *b, const char *s, size_t n);
void jbuf_puts(struct jbuf *b, const char *s);
void jbuf_putc(struct jbuf *b, char c);
void jbuf_printf(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drop the first n (<= b->n) bytes, moving the rest to the front. */
void jbuf_consume(struct jbuf *b, size_t n);
/* Length of the longest tail of b that is a proper prefix of tag: the bytes a streaming parser
 * holds back because they may be the start of tag. */
size_t jbuf_partial_tag(const struct jbuf *b, const char *tag);
/* Free the bytes; the buffer is empty and reusable after. */
void jbuf_free(struct jbuf *b);

#endif
