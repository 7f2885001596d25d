/* lg_stats: a growable list of samples; its summary is common/stats.h's stats_dist. */
#ifndef LOADGEN_LG_STATS_H
#define LOADGEN_LG_STATS_H

#include <stddef.h>

#include "common/stats.h"

struct lg_vec {
    double *v;
    size_t n, cap;
};

void lg_vec_init(struct lg_vec *v);
void lg_vec_deinit(struct lg_vec *v);
void lg_vec_push(struct lg_vec *v, double x);

#endif
