/* fuzz_util: the input cursor shared by the fuzz targets (see fuzz.h). */
#include "fuzz.h"
#include "fuzz_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

uint8_t fz_u8(struct fz *f)
{
    if (f->n == 0)
        return 0;
    uint8_t v = f->p[0];
    f->p++;
    f->n--;
    return v;
}

uint32_t fz_u32(struct fz *f)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = (v << 8) | fz_u8(f);
    return v;
}

const uint8_t *fz_take(struct fz *f, size_t max, size_t *len)
{
    size_t want = fz_u8(f);
    if (max > 255)
        want = (want << 8) | fz_u8(f); /* two bytes, big-endian */
    if (want > max)
        want = max;
    if (want > f->n)
        want = f->n;
    const uint8_t *p = f->p;
    f->p += want;
    f->n -= want;
    *len = want;
    return p;
}

const uint8_t *fz_piece(struct fz *f, size_t *len)
{
    const uint8_t *p = f->p;
    const uint8_t *sep = memchr(p, 0xFF, f->n);
    size_t k = sep ? (size_t)(sep - p) : f->n;
    *len = k;
    f->p += k;
    f->n -= k;
    if (sep) {
        f->p++;
        f->n--;
    }
    return p;
}

char *fz_strndup(const uint8_t *p, size_t n)
{
    char *s = xmalloc(n + 1);
    if (n)
        memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

char *fz_source_path(const char *rel)
{
    const char *root = getenv("TERN_SOURCE_DIR");
    if (!root || !*root)
        root = TERN_FUZZ_SOURCE_DIR;
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", root, rel);
    return p;
}

// ---- split points and output buffers (fuzz_split.h) ----

void fz_split(const uint8_t *seed, size_t n_seed, size_t n, size_t *cuts, size_t *n_cuts,
              size_t cuts_cap)
{
    size_t k = 0, left = n;
    if (n_seed > 0 && seed[0] == 0) {
        /* byte at a time (the caller's cap bounds it; the rest goes in one piece) */
        while (left > 0 && k + 1 < cuts_cap) {
            cuts[k++] = 1;
            left--;
        }
    } else {
        for (size_t i = 0; i < n_seed && left > 0 && k + 1 < cuts_cap; i++) {
            size_t c = seed[i] % 17;
            if (c > left)
                c = left;
            cuts[k++] = c; /* 0-length deltas are allowed: they must be harmless */
            left -= c;
        }
    }
    if (left > 0 || k == 0)
        cuts[k++] = left;
    *n_cuts = k;
}

void fz_buf_put(struct fz_buf *b, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void fz_buf_free(struct fz_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

int fz_buf_eq(const struct fz_buf *a, const struct fz_buf *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
}
