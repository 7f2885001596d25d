/* fuzz_stop: stop strings on a text stream cut at fuzzed points. Checks the header's promise:
 * the released text and the matched index are the same in one piece or split, the output is a
 * prefix of the input, and no stop string appears inside the output.
 * Input: n_seed byte, split bytes, then 0xFF-separated pieces: stop strings (up to 4), text last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_split.h"
#include "text/stop.h"

static int run(const char *const *stops, size_t n_stops, const char *text,
               const size_t *cuts, size_t n_cuts, struct fz_buf *out)
{
    struct stop *s = stop_create(stops, n_stops);
    const char *o;
    size_t ol;
    size_t off = 0;
    bool ended = false;
    for (size_t i = 0; i < n_cuts && !ended; i++) {
        ended = stop_feed(s, text + off, cuts[i], &o, &ol);
        fz_buf_put(out, o, ol);
        off += cuts[i];
    }
    if (!ended) {
        stop_flush(s, &o, &ol);
        fz_buf_put(out, o, ol);
    }
    int m = stop_matched(s);
    stop_destroy(s);
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    size_t n_seed;
    const uint8_t *seed = fz_take(&f, FZ_SPLIT_MAX, &n_seed);
    char *stops[4];
    size_t n_stops = 0;
    uint8_t want = fz_u8(&f) % 5;
    for (; n_stops < want; n_stops++) {
        size_t l;
        const uint8_t *p = fz_piece(&f, &l);
        stops[n_stops] = fz_strndup(p, l);
    }
    const char *text = (const char *)f.p;
    size_t n = f.n;
    size_t cuts[4096 + 2], n_cuts;
    fz_split(seed, n_seed, n, cuts, &n_cuts, sizeof(cuts) / sizeof(cuts[0]));
    size_t whole = n;
    struct fz_buf a = {0}, b = {0};
    int m1 = run((const char *const *)stops, n_stops, text, &whole, 1, &a);
    int m2 = run((const char *const *)stops, n_stops, text, cuts, n_cuts, &b);
    if (m1 != m2 || !fz_buf_eq(&a, &b)) {
        fprintf(stderr, "stop: split changed the result: match %d vs %d, out %zu vs %zu\n", m1, m2,
                a.n, b.n);
        __builtin_trap();
    }
    if (a.n > n || (a.n && memcmp(a.p, text, a.n) != 0))
        __builtin_trap(); /* the output must be a prefix of the text */
    for (size_t i = 0; i < n_stops; i++) {
        size_t l = strlen(stops[i]);
        if (l && a.n >= l && memmem(a.p, a.n, stops[i], l))
            __builtin_trap(); /* a stop string leaked */
        free(stops[i]);
    }
    fz_buf_free(&a);
    fz_buf_free(&b);
    return 0;
}
