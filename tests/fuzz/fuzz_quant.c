/* fuzz_quant: quant_create on config.json text + hf_quant_config.json text (input split at the
 * first 0xFF; an empty piece stands for an absent file), then quant_lookup of module names
 * (fixed names plus one from the input) and quant_scheme_str. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/quant.h"

static const char *const MODULES[] = {
    "model.language_model.layers.0.mlp.experts.0.gate_proj",
    "model.language_model.layers.3.self_attn.q_proj",
    "model.layers.1.linear_attn.in_proj_qkvz",
    "lm_head",
    "model.language_model.layers.39.mlp.shared_expert.down_proj",
    "mtp.layers.0.mlp.experts.255.up_proj",
    "",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    size_t n1, n2, n3;
    const uint8_t *p1 = fz_piece(&f, &n1);
    const uint8_t *p2 = fz_piece(&f, &n2);
    const uint8_t *p3 = fz_piece(&f, &n3);
    char *cfg = fz_strndup(p1, n1);
    char *hf = fz_strndup(p2, n2);
    char *mod = fz_strndup(p3, n3);
    char err[256];
    err[0] = '\0';
    struct quant *q = quant_create(n1 ? cfg : NULL, n2 ? hf : NULL, err, sizeof(err));
    if (q) {
        char buf[160];
        (void)quant_method_name(quant_get_method(q));
        for (size_t i = 0; i < sizeof(MODULES) / sizeof(MODULES[0]); i++) {
            struct quant_scheme s = quant_lookup(q, MODULES[i]);
            quant_scheme_str(&s, buf, sizeof(buf));
        }
        struct quant_scheme s = quant_lookup(q, mod);
        quant_scheme_str(&s, buf, sizeof(buf));
        quant_destroy(q);
    } else if (!err[0]) {
        __builtin_trap(); /* a rejected config must say why */
    }
    free(cfg);
    free(hf);
    free(mod);
    return 0;
}
