/* mtp: the multi-token-prediction draft head (MODEL.md §6.1-6.4) on the CPU: normed embedding
 * and normed main-model hidden state concatenated (embedding FIRST), fc, one full-attention
 * decoder layer with its own K/V in the seq_state, mtp.norm, the shared lm_head. */
#ifndef MODEL_MTP_H
#define MODEL_MTP_H

#include <stdint.h>

struct forward_ctx;
struct model;
struct seq_state;

/* Run the MTP head on n entries at positions pos0 .. pos0+n-1: entry i takes token tokens[i]
 * (= x_{p+1}, the token AFTER position p) and hidden_in[i] (= the main model's final-normed
 * hidden at p, or the previous MTP output for draft steps >= 2). Writes the MTP K/V at those
 * positions and attends to MTP K/V 0..p (entries below pos0 must have been written before).
 * logits_out: (n, V) with FORWARD_LOGITS_ALL else (1, V) for the last entry; may be NULL.
 * hidden_out: optional (n, H) output after mtp.norm (feed back for the next draft step).
 * st->pos is not changed. Errors: ERR_UNSUPPORTED (model without MTP), ERR_INVAL, ERR_FULL. */
int mtp_run(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
            const int32_t *tokens, const float *hidden_in, int pos0, int n, float *logits_out,
            float *hidden_out, int flags);

/* Greedy drafting for one speculative round (MODEL.md §6.3/6.4): the first MTP pass over n
 * entries (tokens[i] = the token after position pos0+i, hidden[i] = the main model's final-normed
 * hidden there; this (re)writes the MTP K/V of those positions), then k-1 feedback steps at
 * positions pos0+n, pos0+n+1, ... with the previous draft and the previous MTP output.
 * drafts (k): argmax tokens. logits (V) and hbuf (n, H) are scratch; hidden_out may alias
 * hidden_in in mtp_run, which this uses. Errors as mtp_run. */
int mtp_draft_greedy(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                     const int32_t *tokens, const float *hidden, int pos0, int n, int k,
                     float *logits, float *hbuf, int32_t *drafts);

#endif
