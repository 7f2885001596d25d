/* lg_sse: split an SSE byte stream into events. Lines end in \n (a preceding \r is dropped);
 * an empty line ends the event; "data:" lines (one optional space after the colon) are joined
 * with \n; other fields and ':' comments are ignored. */
#include "loadgen/lg_sse.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

void lg_sse_init(struct lg_sse *s)
{
    memset(s, 0, sizeof(*s));
}

void lg_sse_deinit(struct lg_sse *s)
{
    free(s->buf);
    free(s->data);
    memset(s, 0, sizeof(*s));
}

static void grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    *p = xrealloc(*p, c);
    *cap = c;
}

static void line(struct lg_sse *s, char *l, size_t n, lg_sse_event_cb cb, void *ud)
{
    if (n > 0 && l[n - 1] == '\r')
        n--;
    if (n == 0) {
        if (s->has_data) {
            grow(&s->data, &s->data_cap, s->data_len + 1);
            s->data[s->data_len] = '\0';
            cb(ud, s->data, s->data_len);
        }
        s->data_len = 0;
        s->has_data = 0;
        return;
    }
    if (n < 5 || memcmp(l, "data:", 5) != 0)
        return;
    size_t off = 5;
    if (off < n && l[off] == ' ')
        off++;
    size_t add = n - off + (s->has_data ? 1 : 0);
    grow(&s->data, &s->data_cap, s->data_len + add + 1);
    if (s->has_data)
        s->data[s->data_len++] = '\n';
    memcpy(s->data + s->data_len, l + off, n - off);
    s->data_len += n - off;
    s->has_data = 1;
}

void lg_sse_feed(struct lg_sse *s, const char *p, size_t n, lg_sse_event_cb cb, void *ud)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        grow(&s->buf, &s->cap, s->len + take + 1);
        memcpy(s->buf + s->len, p, take);
        s->len += take;
        if (!nl)
            return;
        line(s, s->buf, s->len, cb, ud);
        s->len = 0;
        p += take + 1;
        n -= take + 1;
    }
}
