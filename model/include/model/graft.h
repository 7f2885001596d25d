/* graft: give a checkpoint without an MTP head (e.g. a third-party quantization that dropped
 * mtp.*) the head of a compatible checkpoint. The mtp.* tensors of SRC are copied byte for byte
 * (dtype and shape kept) into a new shard `model-mtp.safetensors`, the index of the target gets
 * their entries (a single model.safetensors without an index gets a new index covering both
 * files), and config.json gets mtp_num_hidden_layers (nested text_config or flat) so the head
 * is used. The target is DST itself, or a new directory OUT holding symlinks to DST's files
 * plus the new shard, index and config. */
#ifndef MODEL_GRAFT_H
#define MODEL_GRAFT_H

#include "model/config.h"

#include <stddef.h>
#include <stdint.h>

#define GRAFT_SHARD "model-mtp.safetensors"

struct graft_result {
    int n_tensors;     // mtp.* tensors copied
    int64_t bytes;     // their data bytes
    int mtp_layers;    // mtp_num_hidden_layers written to the config
    char target[1024]; // the directory that now has the head
};

/* Can a head trained with src run on dst? Compares model_type/architecture (text vs full
 * variants match), hidden_size, vocab_size, num_hidden_layers, attention heads, KV heads,
 * head_dim, experts, experts per token, expert and shared-expert sizes. 0, or ERR_UNSUPPORTED
 * with one line naming the field and both values. */
int graft_check(const struct model_config *src, const struct model_config *dst, char *err,
                size_t errlen);

/* Graft the mtp.* tensors of checkpoint dir src into dst (in place when out is NULL, else into
 * the new or empty directory out). Refuses (nothing written) when the configs are incompatible
 * (ERR_UNSUPPORTED), src has no mtp.* tensors (ERR_NOTFOUND), dst already has some or the shard
 * file exists (ERR_STATE). After writing, the target is opened with the loader (header only)
 * and must show the head. 0 or a negative status with one line in err; res may be NULL. */
int graft_mtp(const char *src, const char *dst, const char *out, struct graft_result *res,
              char *err, size_t errlen);

#endif
