/* lg_prompt: the request bodies of a run. Completions: "prompt" is a list of exactly
 * prompt_len random token ids. Chat: one user message of random common words, its length
 * calibrated through the server's POST /tokenize until the rendered prompt has prompt_len
 * tokens (or as close as a few rounds get). Every body streams with usage included. */
#ifndef LOADGEN_LG_PROMPT_H
#define LOADGEN_LG_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "loadgen/lg_run.h"

/* Next value of a splitmix64 generator. */
uint64_t lg_prompt_rand(uint64_t *state);

/* n bodies into *bodies (malloc'd array of malloc'd strings; free with lg_prompt_free).
 * Returns 0, or a negative status with err set. */
int lg_prompt_build(const struct lg_cfg *c, int n, char ***bodies, char *err, size_t errlen);
void lg_prompt_free(char **bodies, int n);

#endif
