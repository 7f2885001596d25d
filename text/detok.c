/* detok: streaming detokenizer. Keeps at most 3 pending bytes (an incomplete UTF-8 prefix) and
 * runs the WHATWG repair from tokenizer_utf8_repair() in streaming mode, which by construction
 * produces the same text as one-shot decoding. */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "text/detok.h"
#include "text/tokenizer.h"

struct detok {
    const struct tokenizer *tok;
    int flags;
    char pending[4]; /* incomplete UTF-8 prefix carried to the next feed */
    size_t n_pending;
    char *in;   /* pending + token bytes */
    char *out;  /* repaired text returned to the caller */
    size_t cap; /* capacity of in; out has 3 * cap */
};

struct detok *detok_create(const struct tokenizer *tok, int flags)
{
    struct detok *d = xcalloc(1, sizeof(*d));
    d->tok = tok;
    d->flags = flags;
    return d;
}

void detok_destroy(struct detok *d)
{
    if (!d)
        return;
    free(d->in);
    free(d->out);
    free(d);
}

void detok_reset(struct detok *d)
{
    d->n_pending = 0;
}

static void reserve(struct detok *d, size_t n)
{
    /* a fresh detok allocates even for n == 0: run() copies into in and terminates out */
    if (d->in && n <= d->cap)
        return;
    d->cap = n < 64 ? 64 : n * 2;
    d->in = xrealloc(d->in, d->cap);
    d->out = xrealloc(d->out, d->cap * 3 + 1);
}

static void run(struct detok *d, const char *bytes, size_t n, int final, const char **text,
                size_t *len)
{
    reserve(d, d->n_pending + n);
    memcpy(d->in, d->pending, d->n_pending);
    if (n)
        memcpy(d->in + d->n_pending, bytes, n);
    size_t total = d->n_pending + n, used = 0;
    *len = tokenizer_utf8_repair(d->in, total, final != 0, d->out, &used);
    d->n_pending = total - used; /* at most 3: an incomplete sequence */
    memcpy(d->pending, d->in + used, d->n_pending);
    d->out[*len] = '\0';
    *text = d->out;
}

int detok_feed(struct detok *d, int32_t id, const char **text, size_t *len)
{
    size_t n = 0;
    const char *b = tokenizer_id_to_bytes(d->tok, id, &n);
    *text = "";
    *len = 0;
    if (!b)
        return ERR_RANGE;
    if ((d->flags & TOKENIZER_DECODE_SKIP_SPECIAL) && tokenizer_is_special(d->tok, id))
        return 0;
    run(d, b, n, 0, text, len);
    return 0;
}

int detok_flush(struct detok *d, const char **text, size_t *len)
{
    run(d, NULL, 0, 1, text, len);
    return 0;
}
