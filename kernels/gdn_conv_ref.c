/* gdn_conv reference. */
#include "gdn_conv.h"

#include <math.h>

#include "common/err.h"

int gdn_conv_ref(float *out, float *state, const float *x, const float *w, const int32_t *slots,
                 int n_seq, int channels, int kc)
{
    if (n_seq < 0 || channels <= 0 || kc < 2 || kc > GDN_CONV_MAX_KC)
        return ERR_INVAL;
    for (int s = 0; s < n_seq; s++) {
        long slot = slots ? slots[s] : s;
        for (int c = 0; c < channels; c++) {
            float *st = state + (slot * channels + c) * (kc - 1);
            float xv = x[(long)s * channels + c];
            double u = (double)w[(long)c * kc + kc - 1] * xv;
            for (int j = 0; j < kc - 1; j++)
                u += (double)w[(long)c * kc + j] * st[j];
            out[(long)s * channels + c] = (float)(u / (1.0 + exp(-u)));
            for (int j = 0; j < kc - 2; j++)
                st[j] = st[j + 1];
            st[kc - 2] = xv;
        }
    }
    return 0;
}
