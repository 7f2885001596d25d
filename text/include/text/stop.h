/* stop: stop strings on a text stream. Feed text deltas, get the part that is safe to send: the
 * longest suffix that could still begin a stop string is held back, so no part of a stop string
 * ever leaks. The stream ends at the first match, defined as the match that ends earliest (ties:
 * the longest), which is the same whether the text arrives in one piece or byte by byte. The stop
 * string itself is not part of the output. Stop strings and text are treated as bytes; with valid
 * UTF-8 on both sides every output ends on a character boundary. */
#ifndef TEXT_STOP_H
#define TEXT_STOP_H

#include <stdbool.h>
#include <stddef.h>

struct stop;

/* n stop strings (NUL-terminated, copied; empty ones are ignored). n may be 0. */
struct stop *stop_create(const char *const *strs, size_t n);
void stop_destroy(struct stop *s);
void stop_reset(struct stop *s);

/* Feed len bytes. out and out_len receive the text to emit now (points into s, or into text when
 * there are no stop strings; valid until the next call). Returns true when a stop string matched
 * in this call (later feeds emit nothing). */
bool stop_feed(struct stop *s, const char *text, size_t len, const char **out, size_t *out_len);
/* End of stream: releases the held-back text (nothing after a match). */
void stop_flush(struct stop *s, const char **out, size_t *out_len);
/* Index of the stop string that matched, or -1. */
int stop_matched(const struct stop *s);
/* Longest stop string in bytes (0 when none): the most text that can be held back, plus one. */
size_t stop_max_len(const struct stop *s);

#endif
