/* wk_spec_cpu: the CPU engine's side of MTP speculative decoding (MODEL.md §6). Per slot it
 * keeps the MTP head's inputs that are known but not yet run (token after position p, the main
 * model's final-normed hidden at p), runs the MTP over every prompt position during prefill,
 * drafts k tokens greedily, runs the verify window [x, drafts] through the main model and
 * commits the accepted prefix (model/forward_spec.h). The acceptance rule is the caller's
 * (services/worker/wk_spec.h). Plain forwards go through wk_spec_cpu_forward so that the MTP
 * K/V stays complete whatever mix of plain steps and rounds a sequence sees. */
#ifndef WK_SPEC_CPU_H
#define WK_SPEC_CPU_H

#include <stdint.h>

struct forward_ctx;
struct model;
struct seq_state;
struct wk_spec_cpu;

/* The startup decision for --speculative-tokens `requested` (-1 = default) with spec_configure:
 * logs its one line (K and the head's resident bytes, or why speculation is off) and sets *k.
 * When K > 0 was asked and cannot be served, the line also goes to stderr and the status
 * (ERR_UNSUPPORTED / ERR_INVAL) is returned: the worker must not start. */
int wk_spec_cpu_configure(const struct model *m, int requested, int *k);

/* For model m (must have an MTP head) and fc (borrowed; takes max_step_tokens tokens per call,
 * at least k+1), n_slots sequences, rounds of at most k drafts. NULL on bad sizes / memory. */
struct wk_spec_cpu *wk_spec_cpu_create(const struct model *m, struct forward_ctx *fc,
                                       uint32_t n_slots, int k, int max_step_tokens);
void wk_spec_cpu_destroy(struct wk_spec_cpu *s);
/* A new sequence starts in slot. */
void wk_spec_cpu_reset(struct wk_spec_cpu *s, uint32_t slot);
/* forward_run of n tokens at st->pos (logits of the last, may be NULL) plus the MTP K/V of
 * every position whose next token is now known. 0 or a forward-pass status. */
int wk_spec_cpu_forward(struct wk_spec_cpu *s, uint32_t slot, struct seq_state *st,
                        const int32_t *tok, int n, float *logits);
/* First half of a round (wk_engine_ops.spec_window): k (1..the create k) greedy drafts after
 * x, then the window [x, drafts] at st->pos .. st->pos+k; logits (k+1, V). ERR_STATE when the
 * slot has no prefill yet, ERR_FULL when the window does not fit st. */
int wk_spec_cpu_window(struct wk_spec_cpu *s, uint32_t slot, struct seq_state *st, int32_t x, int k,
                       int32_t *drafts, float *logits);
/* Second half: keep x and the first a drafts (st->pos = window start + a + 1). ERR_STATE when
 * no window of this slot is open or a is out of range. */
int wk_spec_cpu_commit(struct wk_spec_cpu *s, uint32_t slot, struct seq_state *st, int a);

#endif
