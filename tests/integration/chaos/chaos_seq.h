/* chaos_seq: prompts for the load and their expected texts (see chaos_seq.c). */
#ifndef CHAOS_SEQ_H
#define CHAOS_SEQ_H

#include <stdint.h>

/* Fill prompts[n] and expected[n] (malloc'd) from the running gateway on port. 0 or -1. */
int chaos_seq_make(int port, int n, int max_tokens, uint32_t *prompts, char **expected);

#endif
