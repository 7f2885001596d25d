/* argmax reference. */
#include "argmax.h"

#include <math.h>

#include "common/err.h"

int argmax_ref(int32_t *ids, const float *logits, int n_rows, int vocab)
{
    if (n_rows < 0 || vocab <= 0)
        return ERR_INVAL;
    for (int r = 0; r < n_rows; r++) {
        const float *l = logits + (long)r * vocab;
        int best = 0;
        float bv = -INFINITY;
        int found = 0;
        for (int i = 0; i < vocab; i++) {
            if (isnan(l[i]))
                continue;
            if (!found || l[i] > bv) {
                bv = l[i];
                best = i;
                found = 1;
            }
        }
        ids[r] = best;
    }
    return 0;
}
