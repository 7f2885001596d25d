/* errbuf: the "char *err, size_t errlen" out-parameter that loaders fill with a human-readable
 * reason next to their int status. */
#ifndef COMMON_ERRBUF_H
#define COMMON_ERRBUF_H

#include <stddef.h>

/* snprintf into err[0..len); a no-op when err is NULL or len is 0. */
void errbuf_set(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
