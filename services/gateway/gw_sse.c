/* gw_sse: SSE framing per the WHATWG event-stream format (events end with a blank line; lines
 * end with \n, \r\n or \r; lines starting with ':' are comments). */
#include "gw_sse.h"

#include <string.h>

#include "gw_buf.h"

void gw_sse_event(struct gw_buf *out, const char *data, size_t n)
{
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && data[j] != '\n' && data[j] != '\r')
            j++;
        gw_buf_puts(out, "data: ");
        gw_buf_append(out, data + i, j - i);
        gw_buf_puts(out, "\n");
        if (j >= n)
            break;
        if (data[j] == '\r' && j + 1 < n && data[j + 1] == '\n')
            j++;
        i = j + 1;
    }
    gw_buf_puts(out, "\n");
}

void gw_sse_done(struct gw_buf *out)
{
    gw_buf_puts(out, "data: [DONE]\n\n");
}

void gw_sse_comment(struct gw_buf *out, const char *text)
{
    gw_buf_puts(out, ": ");
    gw_buf_puts(out, text);
    gw_buf_puts(out, "\n\n");
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

size_t gw_sse_next(const char *s, size_t n, struct gw_buf *data)
{
    gw_buf_reset(data);
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
                gw_buf_puts(data, "\n");
            gw_buf_append(data, v, vl);
        }
        /* event:, id:, retry: are not used by our streams */
    }
}
