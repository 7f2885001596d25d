/* lg_stats: a growable list of samples and its summary (mean and linearly interpolated
 * percentiles, the same definition as numpy's default). */
#ifndef LOADGEN_LG_STATS_H
#define LOADGEN_LG_STATS_H

#include <stddef.h>

struct lg_vec {
    double *v;
    size_t n, cap;
};

struct lg_dist {
    size_t n;
    double mean, min, max, p50, p90, p99; /* all 0 when n == 0 */
};

void lg_vec_init(struct lg_vec *v);
void lg_vec_deinit(struct lg_vec *v);
void lg_vec_push(struct lg_vec *v, double x);

/* q in [0, 100]; sorted ascending, n > 0 */
double lg_stats_pct(const double *sorted, size_t n, double q);
/* summary of v[0..n) (v is not modified) */
void lg_stats_dist(const double *v, size_t n, struct lg_dist *out);

#endif
