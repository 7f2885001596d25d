/* tpool: a fixed fork-join pool for data-parallel loops (the CPU backend's matrix products).
 * tpool_for() splits [0, n) into contiguous chunks, runs them on the pool's threads plus the
 * caller, and returns when all are done. Not reentrant: one tpool_for at a time per pool. */
#ifndef COMMON_TPOOL_H
#define COMMON_TPOOL_H

#include <stdint.h>

struct tpool;

/* fn(ctx, begin, end) processes items [begin, end). */
typedef void (*tpool_range_fn)(void *ctx, int64_t begin, int64_t end);

/* n_threads total workers including the caller; 0 = number of online CPUs. NULL on failure. */
struct tpool *tpool_create(int n_threads);
void tpool_destroy(struct tpool *tp);
int tpool_size(const struct tpool *tp);
/* Run fn over [0, n) in chunks of at least min_chunk items. tp may be NULL (runs inline). */
void tpool_for(struct tpool *tp, int64_t n, int64_t min_chunk, tpool_range_fn fn, void *ctx);

#endif
