/* rope reference. */
#include "rope.h"

#include <math.h>

#include "common/err.h"

int rope_ref(float *x, const int32_t *pos, int n_tok, int n_heads, int head_dim, int rot_dim,
             int64_t tok_stride, int64_t head_stride, float theta)
{
    if (n_tok < 0 || n_heads <= 0 || rot_dim <= 0 || rot_dim % 2 || rot_dim > head_dim)
        return ERR_INVAL;
    const int half = rot_dim / 2;
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_heads; h++) {
            float *v = x + t * tok_stride + h * head_stride;
            for (int i = 0; i < half; i++) {
                float inv = (float)(1.0 / pow((double)theta, (double)(2 * i) / rot_dim));
                float ang = (float)pos[t] * inv;
                float c = (float)cos((double)ang), s = (float)sin((double)ang);
                float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c - x2 * s;
                v[i + half] = x2 * c + x1 * s;
            }
        }
    return 0;
}
