/* embed reference. */
#include "embed.h"

#include "common/err.h"
#include "kdtype.h"

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
