/* stop: stop-string matcher for streams. The held-back tail is always shorter than the longest
 * stop string, so each feed searches held + new text only. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "text/stop.h"

struct stop {
    char **strs; /* owned copies, non-empty */
    size_t *lens;
    size_t n;
    size_t max_len;
    char *buf;   /* held-back tail + new text; output points here */
    size_t held; /* bytes of buf held back from earlier feeds */
    size_t cap;
    int matched; /* index into strs, -1 while running */
};

struct stop *stop_create(const char *const *strs, size_t n)
{
    struct stop *s = xcalloc(1, sizeof(*s));
    s->strs = xcalloc(n ? n : 1, sizeof(*s->strs));
    s->lens = xcalloc(n ? n : 1, sizeof(*s->lens));
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(strs[i]);
        if (!l)
            continue;
        s->strs[s->n] = xstrdup(strs[i]);
        s->lens[s->n++] = l;
        if (l > s->max_len)
            s->max_len = l;
    }
    s->matched = -1;
    return s;
}

void stop_destroy(struct stop *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->strs[i]);
    free(s->strs);
    free(s->lens);
    free(s->buf);
    free(s);
}

void stop_reset(struct stop *s)
{
    s->held = 0;
    s->matched = -1;
}

int stop_matched(const struct stop *s)
{
    return s->matched;
}

size_t stop_max_len(const struct stop *s)
{
    return s->max_len;
}

/* Longest k < len(stop) such that buf ends with a k-byte prefix of some stop string. */
static size_t hold_len(const struct stop *s, const char *buf, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t k = s->lens[i] - 1 < n ? s->lens[i] - 1 : n;
        for (; k > best; k--)
            if (memcmp(buf + n - k, s->strs[i], k) == 0)
                break;
        if (k > best)
            best = k;
    }
    return best;
}

bool stop_feed(struct stop *s, const char *text, size_t len, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (s->matched >= 0)
        return false;
    if (s->n == 0) {
        *out = text;
        *out_len = len;
        return false;
    }
    if (s->held + len + 1 > s->cap) {
        s->cap = (s->held + len + 1) * 2;
        s->buf = xrealloc(s->buf, s->cap);
    }
    memcpy(s->buf + s->held, text, len);
    size_t n = s->held + len;
    /* earliest end; on equal ends the longer string (earlier start) */
    size_t best_end = SIZE_MAX, best_pos = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->lens[i] > n)
            continue;
        const char *p = memmem(s->buf, n, s->strs[i], s->lens[i]);
        if (!p)
            continue;
        size_t pos = (size_t)(p - s->buf), end = pos + s->lens[i];
        if (end < best_end || (end == best_end && pos < best_pos)) {
            best_end = end;
            best_pos = pos;
            s->matched = (int)i;
        }
    }
    if (s->matched >= 0) {
        *out = s->buf;
        *out_len = best_pos;
        s->held = 0;
        return true;
    }
    size_t h = hold_len(s, s->buf, n);
    *out = s->buf;
    *out_len = n - h;
    /* the caller reads out before the next call; move the tail after copying it out */
    s->buf[n] = '\0';
    if (h) {
        /* keep the tail at the front for the next feed; out must stay valid, so copy the emitted
         * part to the end of the buffer first when it would be overwritten */
        if (s->cap < n + n - h + h + 1) {
            s->cap = (2 * n + 1) * 2;
            s->buf = xrealloc(s->buf, s->cap);
        }
        memcpy(s->buf + n, s->buf, n - h);  /* emitted text after the live data */
        memmove(s->buf, s->buf + n - h, h); /* held tail to the front */
        *out = s->buf + n;
    }
    s->held = h;
    return false;
}

void stop_flush(struct stop *s, const char **out, size_t *out_len)
{
    *out = s->buf ? s->buf : "";
    *out_len = s->matched >= 0 ? 0 : s->held;
    s->held = 0;
}
