/* gw_sse: SSE framing per the WHATWG event-stream format (events end with a blank line; lines
 * end with \n, \r\n or \r; lines starting with ':' are comments). */
#include "gw_sse.h"

#include <string.h>

#include "common/buf.h"

void gw_sse_event(struct buf *out, const char *data, size_t n)
{
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && data[j] != '\n' && data[j] != '\r')
            j++;
        buf_puts(out, "data: ");
        buf_append(out, data + i, j - i);
        buf_puts(out, "\n");
        if (j >= n)
            break;
        if (data[j] == '\r' && j + 1 < n && data[j + 1] == '\n')
            j++;
        i = j + 1;
    }
    buf_puts(out, "\n");
}

void gw_sse_done(struct buf *out)
{
    buf_puts(out, "data: [DONE]\n\n");
}

void gw_sse_comment(struct buf *out, const char *text)
{
    buf_puts(out, ": ");
    buf_puts(out, text);
    buf_puts(out, "\n\n");
}

/* length of the line starting at s (without its terminator), *term = terminator bytes,
 * or -1 when no terminator is present yet */
static long line_len(const char *s, size_t n, size_t *term)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n') {
            *term = 1;
            return (long)i;
        }
        if (s[i] == '\r') {
            if (i + 1 == n)
                return -1; /* could be \r\n: wait */
            *term = s[i + 1] == '\n' ? 2 : 1;
            return (long)i;
        }
    }
    return -1;
}

size_t gw_sse_next(const char *s, size_t n, struct buf *data)
{
    buf_reset(data);
    size_t off = 0;
    int n_data = 0;
    for (;;) {
        size_t term = 0;
        long l = line_len(s + off, n - off, &term);
        if (l < 0)
            return 0;
        const char *line = s + off;
        off += (size_t)l + term;
        if (l == 0)
            return off; /* blank line: end of event */
        if (line[0] == ':')
            continue;
        if ((size_t)l >= 5 && memcmp(line, "data:", 5) == 0) {
            const char *v = line + 5;
            size_t vl = (size_t)l - 5;
            if (vl && *v == ' ') {
                v++;
                vl--;
            }
            if (n_data++)
                buf_puts(data, "\n");
            buf_append(data, v, vl);
        }
        /* event:, id:, retry: are not used by our streams */
    }
}
