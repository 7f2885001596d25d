/* forward_spec: speculative verification on the CPU reference (MODEL.md §6.5, §6.6): run the
 * window [x, d_1..d_k] through the main model in one call, then leave the state exactly after
 * the accepted tokens (GDN conv windows and S restored from a snapshot and the accepted prefix
 * replayed; attention K/V of rejected positions is simply overwritten later). The acceptance
 * rule itself is the caller's (model/spec.h has the sampling one); forward_spec_verify is the
 * greedy composition of the two halves. */
#ifndef MODEL_FORWARD_SPEC_H
#define MODEL_FORWARD_SPEC_H

#include <stdint.h>

struct forward_ctx;
struct model;
struct seq_snapshot;
struct seq_state;

#define FORWARD_SPEC_MAX 16    // most drafts per round

/* First half of a round. st has run positions < st->pos; x is the committed next token
 * (position st->pos, not yet run); drafts[0..k) are proposed for positions st->pos+1 ..
 * st->pos+k (k in 0..FORWARD_SPEC_MAX; fc must take k+1 tokens per call). Saves st into sn,
 * runs the k+1 window and writes logits (k+1, V): row i is the target distribution after window
 * token i. hidden_out: optional (k+1, H) final-normed hidden states of the window. Afterwards
 * st->pos has advanced by k+1 (call forward_spec_commit next). Negative status on error
 * (st unchanged for ERR_INVAL / ERR_FULL). */
int forward_spec_window(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                        struct seq_snapshot *sn, int32_t x, const int32_t *drafts, int k,
                        float *logits, float *hidden_out, int flags);

/* Second half: after forward_spec_window with the same x, drafts, k and sn, make st the state
 * after x, d_1..d_a (a in 0..k accepted drafts): st->pos = saved pos + a + 1. a == k keeps the
 * window's state as it is; otherwise the snapshot is restored and x, d_1..d_a replayed (with
 * flags; FORWARD_GDN_RECURRENT makes the replay bitwise the window's first a+1 steps). */
int forward_spec_commit(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                        const struct seq_snapshot *sn, int32_t x, const int32_t *drafts, int k,
                        int a, int flags);

/* Greedy verification: window + argmax acceptance + commit. Emits into out (k+1) the accepted
 * drafts followed by the correction or bonus token and returns how many (a+1). logits: scratch
 * (k+1, V). hidden_out: optional (k+1, H); rows 0..a belong to the committed positions (the MTP
 * input of the next round). Negative status on error. */
int forward_spec_verify(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                        struct seq_snapshot *sn, int32_t x, const int32_t *drafts, int k,
                        float *logits, float *hidden_out, int32_t *out, int flags);

#endif
