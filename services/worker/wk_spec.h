/* wk_spec: MTP speculative decoding in the worker's exec thread (MODEL.md §6). The engine
 * drafts and runs the verify window (wk_engine_ops.spec_window / spec_commit); this module
 * sizes each round to what the plan granted, applies the lossless acceptance rule of
 * model/spec.h (exact at temperature 0, rejection sampling otherwise, with the sequence's own
 * penalties, history and rng), and keeps vLLM's spec_decode counters: draft rounds, draft
 * tokens, accepted tokens, accepted tokens per draft position. */
#ifndef WK_SPEC_H
#define WK_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "model/sample.h"
#include "model/spec.h"

#define WK_SPEC_MAX 16 // most drafts per round (= FORWARD_SPEC_MAX)

struct wk_engine;

struct wk_spec_counts {
    uint64_t gated;                // tokens decoded plainly because their gate was closed
    uint64_t probes;               // rounds run to test a closed gate
    uint64_t drafts;               // rounds (verify forwards)
    uint64_t draft_tokens;         // drafts proposed
    uint64_t accepted;             // drafts accepted
    uint64_t per_pos[WK_SPEC_MAX]; // rounds that accepted draft i (0-based)
    uint32_t n_pos;                // positions in use (the engine's K)
};

struct wk_spec;

/* The gate of one sequence: speculation stops for it while its rounds are a loss, (1 + accepted
 * drafts per round) x (a plain decode step's time) < (a round's time), both times measured by
 * the worker (wk_spec_cost); while closed, one probe round after WK_SPEC_PROBE_MIN plain tokens,
 * then twice as many each time it stays closed (at most WK_SPEC_PROBE_MAX), refreshes the
 * acceptance, and the gate opens again when the rounds pay. Until a plain decode step has been
 * timed, a sequence that has run a round decodes every other token plainly (the worker times
 * steps of decode rows only, and sequences that all speculate leave none). */
#define WK_SPEC_PROBE_MIN 16
#define WK_SPEC_PROBE_MAX 256
struct wk_spec_gate {
    float acc;      // drafts accepted per round, moving average; < 0 before the first round
    uint32_t plain; // plain tokens since the last probe (closed)
    uint32_t probe; // plain tokens before the next probe (closed)
    bool closed;
};
void wk_spec_gate_init(struct wk_spec_gate *g);

/* For engine e (borrowed): K = e->info.spec_k when the engine has the spec ops, else 0 (then
 * every round_k is 0 and the worker decodes plainly). sampled: speculate for sampled requests
 * too (temperature > 0; the output distribution is unchanged but the tokens drawn for a seed
 * differ from plain decoding, and with the gate on they depend on the measured times), given
 * when K was asked for explicitly; greedy requests always speculate (their tokens are the
 * same). gate: apply the sequences' gates (wk_spec_round_k); off = every round at K. Never
 * NULL. */
struct wk_spec *wk_spec_create(const struct wk_engine *e, bool sampled, bool gate);
void wk_spec_destroy(struct wk_spec *s);
int wk_spec_k(const struct wk_spec *s);

/* Drafts for the next round of a sequence sampled with sp at position pos (of the fed token)
 * with `left` tokens still granted and KV room for positions < cap: min(K, left-1, cap-pos-1),
 * so that the window (k+1 positions) fits the grant and the round never emits more than `left`
 * tokens. 0 = decode this token plainly (also for sampled requests unless created so, and while
 * the sequence's gate g is closed, except for its probe rounds; g NULL: no gate). */
int wk_spec_round_k(struct wk_spec *s, struct wk_spec_gate *g, const struct sample_params *sp,
                    uint32_t pos, uint32_t left, uint64_t cap);
/* A round of the sequence with gate g emitted n tokens (n - 1 drafts accepted). */
void wk_spec_gate_note(struct wk_spec_gate *g, int n);
/* A measured time: of one speculative round (round) or of one plain decode step (its engine
 * calls; steps with prefill rows are not given). Moving averages; the gate needs both. */
void wk_spec_cost(struct wk_spec *s, bool round, uint64_t ns);

/* One round for the sequence in slot: k drafts after x (fed at pos; blocks/n_blocks is its block
 * table, handed to the engine's spec_window), the verify window, the
 * acceptance against the target with sampling params sp over hist (n_hist tokens: prompt and
 * generated, ending with x), then the engine commit. Writes out (k+1) and *rows (the window's
 * logits, row i = the distribution out[i] was taken from; valid until the next round).
 * hook (may be NULL): per-row params and emitted tokens (model/spec.h spec_hook: a grammar's
 * mask, min_tokens' ban); a round the hook ends early emits fewer tokens, and the engine commits
 * only the drafts emitted. Returns the number of tokens emitted (1..k+1) or a negative status. */
int wk_spec_round(struct wk_spec *s, struct wk_engine *e, uint32_t slot, uint32_t pos, uint32_t x,
                  int k, const uint32_t *blocks, uint32_t n_blocks, struct sample_ctx *sc,
                  const struct sample_params *sp, const int32_t *hist, uint32_t n_hist,
                  struct sample_rng *rng, const struct spec_hook *hook, uint32_t *out,
                  const float **rows);

/* Counters since the previous take (for a StepResult); the totals keep growing. */
void wk_spec_take(struct wk_spec *s, struct wk_spec_counts *delta);
/* Totals since start. */
void wk_spec_totals(const struct wk_spec *s, struct wk_spec_counts *out);
/* Mean tokens per round, 1 + accepted / drafts (vLLM's mean acceptance length); 0 before any. */
double wk_spec_mean_len(const struct wk_spec_counts *c);
/* The periodic "spec_stats" log line: when force, or when period_ms passed since the last one
 * and something changed. */
void wk_spec_log(struct wk_spec *s, uint64_t now_ms, uint64_t period_ms, bool force);

#endif
