/* errbuf: formatted reasons into caller-owned error buffers. */
#include "common/errbuf.h"

#include <stdarg.h>
#include <stdio.h>

void errbuf_set(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}
