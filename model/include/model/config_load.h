/* config_load: fill struct model_config from config.json (nested text_config or flat) and
 * generation_config.json, and validate it. Every error is one line naming the field. */
#ifndef MODEL_CONFIG_LOAD_H
#define MODEL_CONFIG_LOAD_H

#include "model/config.h"

#include <stddef.h>

/* Parse config.json text into c (defaults of the transformers class for absent fields;
 * layer_types explicit or derived from full_attention_interval; rope_parameters with
 * fallbacks to flat rope_theta / partial_rotary_factor; eos_token_id int or list).
 * Does not validate ranges. 0 or ERR_FORMAT with err set. */
int config_parse(struct model_config *c, const char *json, char *err, size_t errlen);
/* Merge eos_token_id (int or list) of generation_config.json text into c->eos_ids (deduplicated,
 * config.json's ids first). 0 or ERR_FORMAT. */
int config_parse_generation(struct model_config *c, const char *json, char *err, size_t errlen);
/* Range checks: positive sizes, heads that divide, top-k <= experts, n_layers <= MODEL_MAX_LAYERS,
 * rotary dim <= head dim ... 0 or ERR_RANGE with a one-line err naming the field. */
int config_validate(const struct model_config *c, char *err, size_t errlen);
/* dir/config.json + dir/generation_config.json (optional) + validate. 0, -errno when config.json
 * cannot be read, ERR_FORMAT or ERR_RANGE. */
int config_load(struct model_config *c, const char *dir, char *err, size_t errlen);

#endif
