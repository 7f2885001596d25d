/* xalloc: small host allocations that abort (with a log line) on OOM. Large or
 * load-dependent allocations must use plain malloc and return ERR_NOMEM instead. */
#ifndef COMMON_XALLOC_H
#define COMMON_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

#endif
