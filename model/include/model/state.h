/* state: the per-sequence decode state of the CPU forward pass (MODEL.md §5): attention K/V of
 * every full-attention layer (and of the MTP layer when the model has one), the GDN conv window
 * and recurrent state S of every linear-attention layer, and the position counter. Everything is
 * fp32 and allocated once at create for tokens_max positions; nothing grows later.
 * A snapshot holds a copy of the GDN conv windows, S and the position, so that a speculative
 * verify window can be rolled back (attention K/V is rolled back by resetting pos alone). */
#ifndef MODEL_STATE_H
#define MODEL_STATE_H

#include <stdint.h>

struct model;

struct seq_state {
    int n_layers;
    int tokens_max;            // K/V capacity in positions (also bounds the MTP K/V)
    int pos;                   // committed tokens = position of the next token
    int kv_width;              // Hkv*D floats per position per attention layer
    int conv_rows;             // Kc-1
    int conv_dim;              // 2*Hk*Dk + Hv*Dv
    int64_t ssm_floats;        // Hv*Dk*Dv
    float **k;                 // [n_layers] (tokens_max, Hkv, D) post norm+RoPE; NULL for GDN
    float **v;                 // [n_layers] (tokens_max, Hkv, D); NULL for GDN layers
    float **conv;              // [n_layers] (Kc-1, conv_dim) previous pre-conv inputs, oldest
                               // first; NULL for attention layers
    float **ssm;               // [n_layers] (Hv, Dk, Dv) S[k][v] per v-head; NULL for attention
    float *mtp_k;              // (tokens_max, Hkv, D) MTP layer K, NULL without MTP
    float *mtp_v;              // (tokens_max, Hkv, D)
};

/* Zeroed state for model m with room for tokens_max positions. NULL on failure (bad sizes or
 * out of memory). */
struct seq_state *seq_state_create(const struct model *m, int tokens_max);
void seq_state_destroy(struct seq_state *st);
/* Forget the sequence: pos = 0, GDN conv windows and S zeroed (K/V contents are dead). */
void seq_state_reset(struct seq_state *st);
/* Bytes held by the state. */
int64_t seq_state_bytes(const struct seq_state *st);

/* ---- snapshot / restore (speculative decoding) ---- */
struct seq_snapshot;
/* A snapshot buffer sized for st. NULL on out of memory. */
struct seq_snapshot *seq_snapshot_create(const struct seq_state *st);
void seq_snapshot_destroy(struct seq_snapshot *sn);
/* Copy pos, every GDN conv window and S of st into sn. */
void seq_state_save(const struct seq_state *st, struct seq_snapshot *sn);
/* Make st what it was at seq_state_save (K/V beyond the saved pos become dead).
 * ERR_INVAL when sn was made for a state of another shape. */
int seq_state_restore(struct seq_state *st, const struct seq_snapshot *sn);

#endif
