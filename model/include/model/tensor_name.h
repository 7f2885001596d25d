/* tensor_name: checkpoint tensor/module names without the wrapper prefix that the multimodal
 * (model.language_model.) and text-only (model.) checkpoints put in front of them. */
#ifndef MODEL_TENSOR_NAME_H
#define MODEL_TENSOR_NAME_H

/* name past its first matching prefix of "model.language_model.", "language_model.model.",
 * "model.", "language_model." ("layers.3.mlp.gate", "norm.weight"); name itself when none
 * matches ("lm_head.weight", "mtp.fc"). Points into name. */
const char *tensor_name_canon(const char *name);

#endif
