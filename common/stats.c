/* stats: sample summaries (common/stats.h). */
#include "common/stats.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double stats_pct(const double *sorted, size_t n, double q)
{
    if (n == 1)
        return sorted[0];
    double pos = q / 100.0 * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i >= n - 1)
        return sorted[n - 1];
    double f = pos - (double)i;
    return sorted[i] + (sorted[i + 1] - sorted[i]) * f;
}

void stats_dist(const double *v, size_t n, struct stats_dist *out)
{
    memset(out, 0, sizeof(*out));
    out->n = n;
    if (n == 0)
        return;
    double *s = xmalloc(n * sizeof(double));
    memcpy(s, v, n * sizeof(double));
    qsort(s, n, sizeof(double), cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    out->mean = sum / (double)n;
    out->min = s[0];
    out->max = s[n - 1];
    out->p50 = stats_pct(s, n, 50);
    out->p90 = stats_pct(s, n, 90);
    out->p99 = stats_pct(s, n, 99);
    free(s);
}
