/* moe_grouped reference: moe_expert_ref is the definition; the scratch layout is the GPU one. */
#include "moe_grouped.h"

#include <stdlib.h>

#include "common/err.h"
#include "moe_expert.h"

size_t moe_grouped_ws_floats(int n_tok, int top_k, int n_experts, int inter, int hidden)
{
    const size_t slots = (size_t)(n_tok > 0 ? n_tok : 0) * (size_t)(top_k > 0 ? top_k : 0);
    const size_t tiles =
        (slots + MOE_GROUPED_TILE_ROWS_SMALL - 1) / MOE_GROUPED_TILE_ROWS_SMALL +
        (size_t)n_experts;
    /* ints: offsets (E+1), perm and pos (slots each), tile expert and tile row (tiles each) */
    const size_t ints = (size_t)n_experts + 1 + 2 * slots + 2 * tiles;
    const size_t h = (slots * (size_t)inter + 1) / 2; /* bf16 pairs */
    return ((ints + 3) & ~(size_t)3) + ((h + 3) & ~(size_t)3) + slots * (size_t)hidden;
}

int moe_grouped_ref(float *out, const float *x, const int32_t *ids, const float *weights, int n_tok,
                    int top_k, int n_experts, const struct kweight *gate_up,
                    const struct kweight *down, int accumulate)
{
    float *ws;
    int rc;
    if (n_tok < 0 || top_k <= 0 || n_experts <= 0 || !gate_up || !down)
        return ERR_INVAL;
    ws = malloc(sizeof(float) * ((size_t)n_tok * top_k * (size_t)down->cols + 1));
    if (!ws)
        return ERR_NOMEM;
    rc = moe_expert_ref(out, ws, x, ids, weights, n_tok, top_k, n_experts, gate_up, down,
                        accumulate);
    free(ws);
    return rc;
}
