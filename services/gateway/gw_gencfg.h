/* gw_gencfg: the checkpoint's generation_config.json as sampling defaults for the fields a
 * request leaves out, as vLLM's --generation-config: "auto" reads it from the tokenizer folder
 * (the checkpoint; absent file = no defaults), "vllm" turns it off (the OpenAI defaults), any
 * other value is a folder that must hold one. Keys read: temperature, top_p, top_k, min_p,
 * repetition_penalty, max_new_tokens (caps the default max_tokens); others are ignored. */
#ifndef GW_GENCFG_H
#define GW_GENCFG_H

#include <stdbool.h>
#include <stddef.h>

#include "gw_req.h"

/* Parse the JSON text of a generation_config.json into d (cleared first). 0, or ERR_INVAL with
 * a reason in err (not a JSON object, or a key of the wrong type / out of range). */
int gw_gencfg_parse(struct gw_req_defaults *d, const char *json, size_t len, char *err,
                    size_t errlen);

/* Resolve mode ("auto", "vllm" or a folder) against tokenizer_dir and load. *found says whether
 * a file was read; source (srclen bytes) gets its path or "none"/"off". 0, or a negative status
 * with a reason in err (a named folder without the file, an unreadable or bad file). */
int gw_gencfg_load(struct gw_req_defaults *d, const char *mode, const char *tokenizer_dir,
                   bool *found, char *source, size_t srclen, char *err, size_t errlen);

/* One "generation_config" log line: source= and the defaults that apply, key=value. */
void gw_gencfg_log(const struct gw_req_defaults *d, const char *source);

#endif
