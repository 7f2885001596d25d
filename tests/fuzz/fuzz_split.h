/* fuzz_split: split points for the streaming-parser targets. The first bytes of an input choose
 * where the text is cut into deltas, so one input checks "same result however it is split". */
#ifndef TERN_FUZZ_SPLIT_H
#define TERN_FUZZ_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#define FZ_SPLIT_MAX 16

/* Cut lengths for text of n bytes from up to FZ_SPLIT_MAX seed bytes: cuts[0..*n_cuts) sum to n.
 * seed byte 0 means "one byte at a time" for the whole text. */
void fz_split(const uint8_t *seed, size_t n_seed, size_t n, size_t *cuts, size_t *n_cuts,
              size_t cuts_cap);

/* A growing byte buffer for collecting outputs. */
struct fz_buf {
    char *p;
    size_t n, cap;
};
void fz_buf_put(struct fz_buf *b, const char *s, size_t n);
void fz_buf_free(struct fz_buf *b);
int fz_buf_eq(const struct fz_buf *a, const struct fz_buf *b);

#endif
