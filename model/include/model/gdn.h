/* gdn: the Gated DeltaNet core (MODEL.md §4) in fp32, both algorithms: the per-token recurrence
 * (§4.1, decode) and the chunked form (§4.2, chunk 64, prefill and verify windows) with an
 * incoming state and a ragged last chunk. Inputs are already conv'ed, l2-normalised (q also scaled
 * by 1/sqrt(Dk)), and g/beta computed. The two agree to ~1e-6 relative; this file is also the CPU
 * reference for the CUDA kernels. The GDN decoder-layer mixer around the core is gdn_layer. */
#ifndef MODEL_GDN_H
#define MODEL_GDN_H

#include <stdint.h>

struct tpool;

#define GDN_CHUNK 64

struct gdn_seq {
    int n_tok;                 // T
    int n_k_heads;             // Hk (q/k heads); v-head j uses q/k head j / (Hv/Hk)
    int n_v_heads;             // Hv (state heads)
    int dk;                    // Dk
    int dv;                    // Dv
    int64_t ld;                // floats between tokens in q, k and v
    const float *q;            // q + t*ld + h*Dk: (T, Hk, Dk) normalised and scaled
    const float *k;            // k + t*ld + h*Dk: (T, Hk, Dk) normalised
    const float *v;            // v + t*ld + j*Dv: (T, Hv, Dv)
    const float *g;            // (T, Hv) log decay, <= 0
    const float *beta;         // (T, Hv) in (0, 1)
    float *state;              // (Hv, Dk, Dv) S[k][v]: read as the incoming state, updated
    float *out;                // (T, Hv, Dv)
};

/* Per-token recurrence; heads run in parallel on tp (may be NULL). */
void gdn_core_recurrent(const struct gdn_seq *s, struct tpool *tp);
/* Floats of scratch gdn_core_chunked needs for these head sizes. */
int64_t gdn_chunked_scratch_floats(int n_v_heads, int dk, int dv);
/* Chunked form with chunk GDN_CHUNK; scratch holds gdn_chunked_scratch_floats() floats. */
void gdn_core_chunked(const struct gdn_seq *s, float *scratch, struct tpool *tp);

#endif
