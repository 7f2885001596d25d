/* rawmask: the allowed-token mask inside a raw text value of tool-call markup (grammar_in_raw),
 * where nearly every token is allowed and a walk of the whole vocabulary trie (tokmask) would
 * visit every node. The tokens that are raw-neutral (grammar_is_raw_neutral) are one precomputed
 * bit set; only the others ('<', control bytes, partial UTF-8: a small share) are walked, in a
 * tokmask of their own. */
#ifndef TEXT_RAWMASK_H
#define TEXT_RAWMASK_H

#include <stddef.h>
#include <stdint.h>

#include "text/grammar.h"

struct rawmask;

/* Over n_vocab token byte strings, as tokmask_create (bytes NULL or 0 long: never allowed). The
 * bytes are copied. */
struct rawmask *rawmask_create(int n_vocab, const char *const *bytes, const size_t *lens);
void rawmask_destroy(struct rawmask *rm);

/* The mask of s, which must be grammar_in_raw(s, g): tokmask_compute's contract (the same
 * TOKMASK_WORDS(n_vocab) words and count; scratch inside rm: one caller at a time). */
int rawmask_compute(struct rawmask *rm, const struct grammar *g, const struct grammar_state *s,
                    uint32_t *mask);

#endif
