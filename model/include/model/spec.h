/* spec: MTP speculative decoding (MODEL.md §6): the startup decision (spec_configure: is there a
 * head, which K, or one plain line saying why not), the lossless acceptance rule (spec_accept:
 * exact match at temperature 0, rejection sampling against the target distribution otherwise,
 * MODEL.md §6.5 with q(d) = 1), the counters, and a CPU driver for one sequence (spec_dec:
 * prefill with the MTP K/V of every prompt position, then rounds of k greedy MTP drafts, one
 * verify forward over the k+1 window, acceptance and state rollback). The output distribution
 * equals plain one-token-at-a-time sampling; at temperature 0 the tokens are identical. */
#ifndef MODEL_SPEC_H
#define MODEL_SPEC_H

#include "model/forward_spec.h"
#include "model/sample.h"

#include <stddef.h>
#include <stdint.h>

struct forward_ctx;
struct model;
struct seq_state;

#define SPEC_DEFAULT_K 3 // drafts per round when a head exists and none was asked for

/* ---- startup decision ---- */

/* Decide K for model m. requested_k: -1 = default (SPEC_DEFAULT_K with a head, else 0), 0 = off,
 * > 0 = exactly that many (1..FORWARD_SPEC_MAX). Writes one line (no newline) into msg:
 *  - head loaded: K and the head's resident bytes (rc 0, *k_out = K; 0 when requested 0);
 *  - config declares an MTP layer but the checkpoint has no mtp.* tensors: says exactly that and
 *    that speculative decoding is off (rc 0, *k_out = 0), unless requested_k > 0: then the same
 *    facts as an error (rc ERR_UNSUPPORTED);
 *  - no MTP declared nor present: "off" (rc 0, *k_out = 0), or ERR_UNSUPPORTED if requested_k > 0;
 *  - requested_k out of range: ERR_INVAL.
 * Only reads m->cfg and m->has_mtp / m->mtp (works on any struct model). */
int spec_configure(const struct model *m, int requested_k, int *k_out, char *msg, size_t len);

/* Bytes the loaded MTP head occupies (fc, the decoder layer's weights and scales, the norms);
 * 0 without a head. The shared embedding and lm_head are not counted. */
int64_t spec_head_bytes(const struct model *m);

/* ---- counters ---- */

struct spec_stats {
    int k;            // drafts per round
    int64_t rounds;   // verify rounds
    int64_t drafted;  // draft tokens proposed (k per round)
    int64_t accepted; // draft tokens accepted
    int64_t emitted;  // tokens produced by the rounds (accepted + correction/bonus)
    int64_t accepted_at[FORWARD_SPEC_MAX]; // rounds in which draft i (0-based) was accepted
};

void spec_stats_reset(struct spec_stats *s, int k);
/* Count one round in which a of the k drafts were accepted. */
void spec_stats_add(struct spec_stats *s, int a);
/* accepted / drafted (0 when nothing was drafted). */
double spec_stats_acceptance(const struct spec_stats *s);
/* Acceptance of draft position i: rounds that accepted draft i / rounds. */
double spec_stats_acceptance_at(const struct spec_stats *s, int i);
/* Mean tokens per round = 1 + accepted / rounds (vLLM's "mean acceptance length"). */
double spec_stats_mean_len(const struct spec_stats *s);
/* One key=value line (no newline): spec_k=.. spec_rounds=.. spec_drafted=.. spec_accepted=..
 * spec_acceptance=.. spec_mean_len=.. spec_accept_at=a0,a1,.. Returns snprintf's count. */
int spec_stats_format(const struct spec_stats *s, char *buf, size_t len);

/* ---- acceptance ---- */

/* One round's acceptance. logits: (k+1, V), row i = target logits after window token i.
 * hist: the committed tokens (n_hist, ending with the window's first token x) FOLLOWED BY the
 * k drafts (hist[n_hist + i] == drafts[i]); row i's penalties see hist[0 .. n_hist + i).
 * Temperature <= 0: d_i accepted iff it equals the (penalised) argmax of row i-1; the first
 * mismatch emits that argmax, full acceptance the argmax of row k. Otherwise P_i =
 * sample_probs(row i); d_i accepted iff u < P_{i-1}(d_i) (u ~ U[0,1) from rng); the first
 * rejection emits a token drawn from P_{i-1} with d_i zeroed and renormalised; full
 * acceptance emits a bonus token drawn from P_k. probs: scratch (V). Writes out (k+1): the
 * accepted drafts then the correction/recovered/bonus token; returns a+1 (a = accepted),
 * or ERR_INVAL (bad params / k). */
int spec_accept(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                int n_vocab, const int32_t *drafts, int k, const int32_t *hist, int n_hist,
                struct sample_rng *rng, float *probs, int32_t *out);

/* Per-row parameters for a sequence whose logits processors change with every emitted token (a
 * grammar's mask, min_tokens' ban of the stop ids). Rows are decided in order, and each decision
 * only ever sees the tokens emitted before it, so a mask made from the state after those tokens
 * keeps the acceptance lossless: a draft the mask refuses has probability 0 and is rejected. */
struct spec_hook {
    void *user;
    /* Before row i (0..k) is decided: adjust p, a copy of the round's params (allow, ban_ids,
     * n_ban), for the state after the i tokens emitted so far. < 0 ends the round with it. */
    int (*row)(void *user, int i, struct sample_params *p);
    /* Token t was emitted at row i (an accepted draft, the correction or the bonus): advance
     * the state. < 0 ends the round with it; 1: the sequence ended with t (a stop): no further
     * row is decided and the round returns i + 1. */
    int (*emit)(void *user, int i, int32_t t);
};

/* spec_accept with a hook (NULL: spec_accept). */
int spec_accept_hooked(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                       int n_vocab, const int32_t *drafts, int k, const int32_t *hist, int n_hist,
                       struct sample_rng *rng, float *probs, int32_t *out,
                       const struct spec_hook *hook);

/* ---- CPU driver for one sequence ---- */

/* Draft hook (tests: oracle drafts): propose k drafts after the committed sequence
 * seq[0..n_seq) (its last token is the window's first). 0 or a negative status. */
typedef int (*spec_draft_fn)(void *user, const int32_t *seq, int n_seq, int k, int32_t *drafts);
/* Acceptance hook with spec_accept's contract (tests plug a wrong rule to show they can fail). */
typedef int (*spec_accept_fn)(struct sample_ctx *sc, const struct sample_params *p,
                              const float *logits, int n_vocab, const int32_t *drafts, int k,
                              const int32_t *hist, int n_hist, struct sample_rng *rng, float *probs,
                              int32_t *out);

struct spec_dec_opts {
    int k;                   // drafts per round, 1..FORWARD_SPEC_MAX (fc takes >= k+1 tokens)
    struct sample_params sp; // the target sampling parameters
    int prefill_chunk;       // prompt tokens per forward call; 0 = fc's maximum
    int prefill_flags;       // FORWARD_GDN_* for the prompt (decode/verify always recurrent)
    spec_draft_fn draft;     // NULL: the model's MTP head (greedy drafts)
    void *draft_user;
    spec_accept_fn accept; // NULL: spec_accept
};

/* k 3, default sampling params (temperature 1), everything else 0/NULL. */
void spec_dec_opts_default(struct spec_dec_opts *o);

struct spec_dec;
/* A decoder over fc and st (borrowed; st must be fresh or reset; st->tokens_max must hold the
 * prompt, the tokens to generate and k+1 more). seq_max: most tokens of prompt + output.
 * NULL on bad options (k out of range, fc too small, MTP drafts asked of a model without a
 * head) or out of memory. */
struct spec_dec *spec_dec_create(const struct model *m, struct forward_ctx *fc,
                                 struct seq_state *st, const struct spec_dec_opts *o, int seq_max);
void spec_dec_destroy(struct spec_dec *d);
/* Run the prompt (n tokens) through the main model in chunks of prefill_chunk (and, with MTP
 * drafts, the MTP head over positions 0..n-2 with the tokens shifted by one), then sample the
 * first token exactly as plain decoding does (sample_token on the last row). 0 or a negative
 * status. Equivalent to spec_dec_feed per chunk followed by spec_dec_start. */
int spec_dec_prefill(struct spec_dec *d, const int32_t *prompt, int n, struct sample_rng *rng,
                     int32_t *first);
/* Chunked prefill for a caller that schedules chunks itself: run the next n prompt tokens
 * (1..prefill_chunk) and write the MTP K/V of every position whose next token is now known.
 * 0, ERR_INVAL (after start, bad n, no room) or a forward-pass status. */
int spec_dec_feed(struct spec_dec *d, const int32_t *tokens, int n);
/* After the last chunk: sample the first token from the prompt's last logits. 0 or negative. */
int spec_dec_start(struct spec_dec *d, struct sample_rng *rng, int32_t *first);
/* One round: k drafts, the verify forward, acceptance, rollback. Writes the emitted tokens into
 * out (k+1) and returns how many (1..k+1); ERR_FULL when the window does not fit in st or
 * seq_max; other negative statuses from the forward pass. */
int spec_dec_step(struct spec_dec *d, struct sample_rng *rng, int32_t *out);
const struct spec_stats *spec_dec_stats(const struct spec_dec *d);
/* The sequence so far (prompt + generated); *n its length. */
const int32_t *spec_dec_tokens(const struct spec_dec *d, int *n);

#endif
