/* kv_geom: the model geometry that the KV-pool plan (common/kv_plan.h) needs, from a config. */
#ifndef MODEL_KV_GEOM_H
#define MODEL_KV_GEOM_H

#include "common/kv_plan.h"
#include "model/config.h"

/* Fill g from c. mtp_layers = c->mtp_n_layers when has_mtp_tensors, else 0. */
void model_kv_geom(const struct model_config *c, bool has_mtp_tensors, struct kv_geom *g);

#endif
