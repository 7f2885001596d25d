/* wk_grammar: constrained decoding of the worker's sequences (SamplingParams.json_schema: a JSON
 * Schema, or a forced tool-call spec of text/grammar_tools.h). The
 * worker-wide part holds the vocabulary trie (text/tokmask.h), built on first use from the model
 * directory's tokenizer.json (the file the gateway tokenizes with, copied beside the weights by
 * `tern make-tiny-model` and shipped with every checkpoint), and one mask buffer; each sequence
 * holds its compiled grammar and automaton state. Exec thread only. */
#ifndef WK_GRAMMAR_H
#define WK_GRAMMAR_H

#include <stdbool.h>
#include <stdint.h>

struct wk_grammar;
struct wk_gseq;

/* model_dir: where tokenizer.json is looked for (may be "" for engines without one: every
 * grammar sequence then fails). vocab: the engine's vocabulary size (logit rows). */
struct wk_grammar *wk_grammar_create(const char *model_dir, uint32_t vocab);
void wk_grammar_destroy(struct wk_grammar *wg);

/* A sequence under schema (JSON text); replay: completion tokens at the end of its prefill to
 * advance over before the first sample. NULL with *msg set (static text) when the schema does not
 * compile or the vocabulary cannot be loaded. Free with wk_gseq_destroy. */
struct wk_gseq *wk_gseq_create(struct wk_grammar *wg, const char *schema, uint32_t replay,
                               const char **msg);
void wk_gseq_destroy(struct wk_gseq *gs);

/* The allowed-id bit set for gs's next token (owned by wg, valid until the next call): the
 * tokens the grammar accepts, plus stop_ids once the value may end. hist (n_hist): the sequence's
 * tokens so far (the replay is taken from its end). ERR_STATE with *msg when a replayed token is
 * refused or nothing is allowed. */
int wk_grammar_mask(struct wk_grammar *wg, struct wk_gseq *gs, const int32_t *hist, uint32_t n_hist,
                    const uint32_t *stop_ids, uint32_t n_stop, const uint32_t **allow,
                    const char **msg);
/* Advance gs over the sampled token; is_stop: tok ends the sequence (a stop id allowed by the
 * mask). ERR_STATE when the grammar refuses it. */
int wk_grammar_accept(struct wk_grammar *wg, struct wk_gseq *gs, int32_t tok, bool is_stop);

#endif
