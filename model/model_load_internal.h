/* model_load_internal: state shared by the loader (model_load.c) and its dummy-weight
 * generator (model_dummy.c). Not a public header. */
#ifndef MODEL_LOAD_INTERNAL_H
#define MODEL_LOAD_INTERNAL_H

#include "model/model_load.h"
#include "model/quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tpool;

struct model_load_priv {
    struct st_set *st;
    struct quant *q;
    void **owned; // buffers freed by model_destroy
    int64_t n_owned, cap_owned;
    struct model_load_stats stats;
};

struct model_loader {
    struct model *m;
    struct model_load_priv *p;
    const struct st_set *st;
    const struct quant *q;
    const struct model_config *c;
    bool dummy;    // random weights from the config alone (no files)
    bool header_only; // shapes and formats only: no tensor data (dummy: nothing allocated)
    uint64_t seed; // dummy seed
    bool dummy_device; // dummy, not header_only: the large matrices left to the device (qweight.dummy)
    struct tpool *tp; // dummy: the fill's threads (NULL: the caller alone)
    char *err;
    size_t errlen;
};

/* Write a one-line error into L->err; returns ERR_FORMAT. */
int model_load_fail(struct model_loader *L, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hand ptr to the model (freed by model_destroy); returns ptr. */
void *model_load_own(struct model_loader *L, void *ptr);

/* Dummy weights (opts.dummy): deterministic per (seed, name), counted in the stats by group.
 * 0, ERR_NOMEM (allocation failed) or ERR_FORMAT, with err set. */
int model_dummy_vec(struct model_loader *L, const char *name, int64_t n, float **out);
int model_dummy_dense(struct model_loader *L, const char *name, int64_t rows, int64_t cols,
                      struct qweight *w);
int model_dummy_linear(struct model_loader *L, const char *module, const struct quant_scheme *s,
                       int64_t rows, int64_t cols, struct qweight *w);

#endif
