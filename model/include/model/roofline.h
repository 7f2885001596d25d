/* roofline: the bytes one decode step must move for a loaded checkpoint (weights actually touched,
 * recurrent state, attention KV), by part, so that a measured decode rate can be stated as a
 * fraction of the memory-bandwidth limit (issue 9). Header-only loads are enough: only formats and
 * shapes are read (model_load_opts.header_only, also with dummy).
 *
 * Per step of B sequences at context ctx (tokens already in the cache):
 *  - dense: every weight a token always uses, read once per step (embedding rows: B of them;
 *    GDN and attention projections, router, shared expert and its gate, norms and small vectors);
 *  - experts: per layer, the expected number of distinct routed experts the B tokens select,
 *    E (1 - (1 - k/E)^B) (B = 1: exactly k), times the mean bytes of one expert (gate, up, down);
 *  - lm_head: once;
 *  - gdn_state: per sequence and GDN layer, the conv window (conv_dim x (Kc-1), model dtype) and the
 *    recurrent S (Hv x Dk x Dv, mamba_ssm_dtype), each read and written;
 *  - kv: per sequence and attention layer, K and V of ctx positions read and of one written
 *    (Hkv x D each, kv element size).
 * The MTP head is not counted (a plain decode step does not run it). */
#ifndef MODEL_ROOFLINE_H
#define MODEL_ROOFLINE_H

#include <stdint.h>

struct model;

struct roofline_opts {
    int batch;        // sequences per step (>= 1)
    int64_t ctx;      // context per sequence (tokens already cached)
    int kv_elem;      // bytes per K/V element: 2 (bf16) or 1 (fp8)
};

struct roofline_step {
    double dense;     // bytes, see above (doubles: the expert count is an expectation)
    double experts;
    double lm_head;
    double gdn_state;
    double kv;
    double total;
    double expert_bytes;    // mean bytes of one routed expert (gate + up + down)
    double experts_touched; // expected distinct experts per layer
};

/* Fill *out for m. 0, or ERR_INVAL (bad opts). */
int roofline_decode(const struct model *m, const struct roofline_opts *o, struct roofline_step *out);

#endif
