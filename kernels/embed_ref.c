/* embed reference. */
#include "embed.h"

#include "common/err.h"
#include "kdtype.h"
#include "rmsnorm.h"

int embed_ref(float *out, const uint16_t *table, const int32_t *ids, int n_tok, int dim, int vocab)
{
    if (n_tok < 0 || dim <= 0 || vocab <= 0)
        return ERR_INVAL;
    for (int t = 0; t < n_tok; t++) {
        int id = ids[t];
        for (int i = 0; i < dim; i++)
            out[(long)t * dim + i] =
                (id >= 0 && id < vocab) ? kdtype_bf16_to_f32(table[(long)id * dim + i]) : 0.0f;
    }
    return 0;
}

int embed_rmsnorm_ref(float *h, float *x, const uint16_t *table, const int32_t *ids, int n_tok,
                      int dim, int vocab, const float *w, float eps, float w_offset)
{
    if (!h || !x || !w || h == x)
        return ERR_INVAL;
    const int rc = embed_ref(h, table, ids, n_tok, dim, vocab);
    return rc < 0 ? rc : rmsnorm_ref(x, h, w, n_tok, dim, eps, w_offset);
}
