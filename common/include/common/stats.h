/* stats: the summary of a list of samples (mean, min, max and linearly interpolated
 * percentiles, the same definition as numpy's default), for `tern bench` and
 * `tern-worker --bench`. */
#ifndef COMMON_STATS_H
#define COMMON_STATS_H

#include <stddef.h>

struct stats_dist {
    size_t n;
    double mean, min, max, p50, p90, p99; /* all 0 when n == 0 */
};

/* q in [0, 100]; sorted ascending, n > 0 */
double stats_pct(const double *sorted, size_t n, double q);
/* summary of v[0..n) (v is not modified) */
void stats_dist(const double *v, size_t n, struct stats_dist *out);

#endif
