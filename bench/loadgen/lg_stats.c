/* lg_stats: a growable list of samples (summaries: common/stats.h). */
#include "loadgen/lg_stats.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

void lg_vec_init(struct lg_vec *v)
{
    memset(v, 0, sizeof(*v));
}

void lg_vec_deinit(struct lg_vec *v)
{
    free(v->v);
    memset(v, 0, sizeof(*v));
}

void lg_vec_push(struct lg_vec *v, double x)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 64;
        v->v = xrealloc(v->v, v->cap * sizeof(double));
    }
    v->v[v->n++] = x;
}
