/* tiny_internal: declarations shared by tiny.c (tensors) and tiny_json.c (JSON files). */
#ifndef MODEL_TINY_INTERNAL_H
#define MODEL_TINY_INTERNAL_H

#include "model/tiny.h"

#include <stdbool.h>

#define TINY_MAX_EOS 4

struct tiny_vocab {
    int vocab_size;        // rounded up to a multiple of 64
    int eos[TINY_MAX_EOS]; // generation_config eos ids (first = config eos_token_id)
    int n_eos;
    int bos; // -1 when none
};

bool tiny_is_nvfp4(enum tiny_format f);
bool tiny_is_quantized(enum tiny_format f);
/* Vocab size and stop ids: from o->tokenizer (max id + 1 over model.vocab and added_tokens,
 * <|im_end|> / <|endoftext|> as eos) or from o->vocab (eos = vocab-1). ERR_FORMAT / -errno. */
int tiny_vocab_read(const struct tiny_opts *o, struct tiny_vocab *tv);
/* config.json, generation_config.json and hf_quant_config.json (ModelOpt) into outdir. */
int tiny_json_write(const struct tiny_opts *o, const struct tiny_vocab *tv, const char *outdir);
/* Copy tokenizer.json and its sibling tokenizer_config.json (when present) into outdir. */
int tiny_copy_tokenizer(const char *tokenizer_json, const char *outdir);

#endif
