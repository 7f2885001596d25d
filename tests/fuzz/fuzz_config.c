/* fuzz_config: config.json and generation_config.json text through config_parse,
 * config_parse_generation and config_validate. Input: config text, 0xFF, generation text. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/config_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    size_t n1, n2;
    const uint8_t *p1 = fz_piece(&f, &n1);
    const uint8_t *p2 = fz_piece(&f, &n2);
    char *cfg = fz_strndup(p1, n1);
    char *gen = fz_strndup(p2, n2);
    struct model_config *c = calloc(1, sizeof(*c));
    char err[256];
    err[0] = '\0';
    if (c && config_parse(c, cfg, err, sizeof(err)) == 0) {
        if (n2 > 0)
            (void)config_parse_generation(c, gen, err, sizeof(err));
        err[0] = '\0';
        if (config_validate(c, err, sizeof(err)) != 0 && !err[0])
            __builtin_trap(); /* a rejected config must name the field */
    } else if (c && !err[0]) {
        __builtin_trap();
    }
    free(c);
    free(cfg);
    free(gen);
    return 0;
}
