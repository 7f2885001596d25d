/* detok: incremental detokenizer for streaming. Feed ids one at a time and get the new text; the
 * output never ends inside a UTF-8 sequence (incomplete bytes are held back until completed) and
 * invalid bytes become U+FFFD exactly as tokenizer_decode() does, so the concatenation of all
 * outputs (plus detok_flush) equals tokenizer_decode() of all ids with the same flags. */
#ifndef TEXT_DETOK_H
#define TEXT_DETOK_H

#include <stddef.h>
#include <stdint.h>

struct tokenizer;
struct detok;

/* tok is borrowed and must outlive the detok. flags: TOKENIZER_DECODE_* (tokenizer.h). */
struct detok *detok_create(const struct tokenizer *tok, int flags);
void detok_destroy(struct detok *d);
/* Forget all state (start a new sequence). */
void detok_reset(struct detok *d);

/* Feed one id. *text points to the new complete text (valid UTF-8, owned by d, valid until the
 * next call), *len its length (may be 0). Returns 0, or ERR_RANGE for an unknown id (state kept).
 */
int detok_feed(struct detok *d, int32_t id, const char **text, size_t *len);
/* End of sequence: a dangling partial sequence is emitted as U+FFFD. Same output contract. */
int detok_flush(struct detok *d, const char **text, size_t *len);

#endif
