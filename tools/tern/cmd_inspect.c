/* tern inspect DIR [--json] [--check] [--load-format auto|dummy] [--seed N]: summarize a
 * checkpoint (config, tensors and bytes per group, quantization per module class, MTP).
 * Header-only by default (also with dummy: shapes and formats from config.json alone, nothing
 * allocated); --check maps the data and validates every offset, or with dummy builds the random
 * weights. Errors: one line on stderr, exit 1. */
#include "model/inspect.h"
#include "model/model_load.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_inspect(int argc, char **argv);
const char tern_cmd_inspect_help[] =
    "summarize a checkpoint: inspect DIR [--json] [--check] [--load-format auto|dummy]";

static const char USAGE[] =
    "usage: tern inspect DIR [--json] [--check] [--load-format auto|dummy] [--seed N]";

int tern_cmd_inspect(int argc, char **argv)
{
    const char *dir = NULL;
    bool json = false;
    struct model_load_opts o = {.header_only = true};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--check") == 0) {
            o.header_only = false;
        } else if (strcmp(argv[i], "--load-format") == 0 && i + 1 < argc) {
            const char *f = argv[++i];
            if (strcmp(f, "dummy") == 0) {
                o.dummy = true;
            } else if (strcmp(f, "auto") != 0) {
                fprintf(stderr, "tern inspect: unknown --load-format '%s' (auto|dummy)\n", f);
                return 1;
            }
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            o.dummy_seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("%s\n", USAGE);
            return 0;
        } else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "tern inspect: unexpected argument '%s' (%s)\n", argv[i], USAGE);
            return 1;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        fprintf(stderr, "tern inspect: missing DIR (%s)\n", USAGE);
        return 1;
    }
    char err[1024];
    if (inspect_dir(dir, &o, json, stdout, err, sizeof(err)) < 0) {
        fprintf(stderr, "tern inspect: %s\n", err);
        return 1;
    }
    return 0;
}
