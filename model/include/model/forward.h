/* forward: the CPU reference forward pass of qwen3_5_moe (MODEL.md §3): embedding, the decoder
 * layers by layer_types (Gated DeltaNet or gated attention, each followed by the sparse MoE),
 * final RMSNorm1p and lm_head, all in fp32 with weights read through qweight. The big products
 * run on a tpool. A forward_ctx holds every scratch buffer, sized once for n_tok_max tokens per
 * call and ctx_max positions per sequence; nothing is allocated per token. */
#ifndef MODEL_FORWARD_H
#define MODEL_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

struct model;
struct seq_state;
struct tpool;
struct forward_ctx;

enum forward_flag {
    FORWARD_LOGITS_ALL = 1 << 0,     // logits for every position: (n_tok, V); default last: (1, V)
    FORWARD_GDN_RECURRENT = 1 << 1,  // GDN core by the per-token recurrence for any n_tok
    FORWARD_GDN_CHUNKED = 1 << 2,    // GDN core by the chunked form even for n_tok == 1
    /* W4A4 (NVFP4 with input scales) weights run weight-only: dequantized weights times
     * unquantized activations, the semantics of a GPU without FP4 tensor cores (sm_90, and
     * sm_120/121 while the runner has no W4A4 dispatch). Default: activations quantized per 16
     * as the checkpoint says (CHECKPOINTS.md §1.5). No effect on other formats. */
    FORWARD_W4A4_WEIGHT_ONLY = 1 << 3,
};

/* Scratch for model m: at most n_tok_max tokens per forward_run/mtp_run call and sequences of at
 * most ctx_max positions. tp is borrowed (NULL = single-threaded) and must outlive the ctx.
 * NULL on failure. */
struct forward_ctx *forward_ctx_create(const struct model *m, int n_tok_max, int ctx_max,
                                       struct tpool *tp);
void forward_ctx_destroy(struct forward_ctx *fc);

/* Run n_tok tokens at positions st->pos .. st->pos+n_tok-1 and advance st->pos by n_tok.
 * GDN: default chunked for n_tok > 1 and recurrent for n_tok == 1 (flags override).
 * logits_out: (n_tok, V) with FORWARD_LOGITS_ALL, else (1, V) for the last token; may be NULL.
 * hidden_out: optional (n_tok, H), the final-normed hidden states (the MTP input).
 * Errors: ERR_INVAL (bad token id, n_tok out of [1, n_tok_max]), ERR_FULL (st or ctx capacity
 * exceeded; nothing is changed). */
int forward_run(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                const int32_t *tokens, int n_tok, float *logits_out, float *hidden_out,
                int flags);

/* Route margins (a test's view of the MoE's discontinuity): with tracking on, every route of
 * forward_run / mtp_run records the gap between its k-th and (k+1)-th router logits; take returns
 * the smallest since the previous take (INFINITY: none, or tracking off) and starts over. Two
 * engines that differ by rounding may pick different experts where this gap is about their
 * difference. */
void forward_route_track(struct forward_ctx *fc, bool on);
float forward_route_gap_take(struct forward_ctx *fc);

#endif
