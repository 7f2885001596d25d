/* tokmask: the allowed-token mask of a grammar state over a whole vocabulary. The token byte
 * strings are kept in a byte trie; a mask is one depth-first walk of the trie that advances a copy
 * of the grammar state byte by byte and prunes a subtree at the first byte refused, so the cost
 * follows the allowed tokens' bytes, not the vocabulary size times the token length. */
#ifndef TEXT_TOKMASK_H
#define TEXT_TOKMASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/grammar.h"

struct tokenizer;
struct tokmask;

/* Words of a mask over n_vocab ids: bit (id & 31) of word id >> 5, set = allowed. */
#define TOKMASK_WORDS(n_vocab) (((size_t)(n_vocab) + 31) / 32)

/* Trie over n_vocab token byte strings: bytes[i] (lens[i] bytes; NULL or 0 bytes: the id is never
 * allowed, e.g. special tokens). The bytes are copied. */
struct tokmask *tokmask_create(int n_vocab, const char *const *bytes, const size_t *lens);
/* The byte strings a grammar may emit, id by id (n_vocab may exceed the tokenizer's: padded
 * lm_head rows): every regular token, and of the added tokens only the tool-call tags
 * <tool_call> and </tool_call>, which the model writes as one token each (text/grammar_tools.h
 * allows them by their text); the others (special or not: <|im_end|>, <think>, ...) NULL with
 * length 0. *bytes and *lens are malloc'd (n_vocab each) for the caller to free; the strings
 * belong to tok. */
void tokmask_grammar_vocab(const struct tokenizer *tok, int n_vocab, const char ***bytes,
                           size_t **lens);
/* tokmask_create over tokmask_grammar_vocab. */
struct tokmask *tokmask_create_from_tokenizer(const struct tokenizer *tok, int n_vocab);
void tokmask_destroy(struct tokmask *tm);
int tokmask_vocab(const struct tokmask *tm);

/* Write the mask of the tokens whose bytes s accepts (TOKMASK_WORDS(n_vocab) words). End of text
 * is not a token here: the caller allows its stop ids when grammar_is_accepting(s). Uses scratch
 * inside tm: one caller at a time per tokmask. Returns the number of allowed ids. Inside a string
 * it starts from a set precomputed for the string's text state and walks only the tokens that
 * close the string. */
int tokmask_compute(struct tokmask *tm, const struct grammar *g, const struct grammar_state *s,
                    uint32_t *mask);
/* The same mask and count by the plain walk (string-neutral tokens plus a walk of the others
 * inside strings, the whole trie elsewhere): the reference tokmask_compute is tested against. */
int tokmask_compute_ref(struct tokmask *tm, const struct grammar *g, const struct grammar_state *s,
                        uint32_t *mask);
/* Advance s by the bytes of token id. false: id has no bytes or s refuses them (s undefined). */
bool tokmask_advance(const struct tokmask *tm, const struct grammar *g, struct grammar_state *s,
                     int32_t id);

#endif
