/* tern inspect DIR [--json] [--check] [--load-format auto|dummy] [--seed N]: summarize a
 * checkpoint (config, tensors and bytes per group, quantization per module class, MTP).
 * Header-only by default (also with dummy: shapes and formats from config.json alone, nothing
 * allocated); --check maps the data and validates every offset, or with dummy builds the random
 * weights. Errors: one line on stderr, exit 1 (2 for usage). */
#include "common/args.h"
#include "common/xalloc.h"
#include "cli.h"
#include "model/inspect.h"
#include "model/model_load.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_inspect(int argc, char **argv);
const char tern_cmd_inspect_help[] =
    "summarize a checkpoint: inspect DIR [--json] [--check] [--load-format auto|dummy]";

int tern_cmd_inspect(int argc, char **argv)
{
    const char *dir = NULL;
    bool json = false, check = false;
    struct model_load_opts o = {.header_only = true};
    const struct args_opt opts[] = {
        ARGS_STR("DIR", NULL, &dir, "checkpoint directory"),
        ARGS_BOOL("--json", &json, "one JSON object instead of text"),
        ARGS_BOOL("--check", &check,
                  "map the data and validate every offset (dummy: build the random weights)"),
        ARGS_FN("--load-format", "auto|dummy", &o.dummy, cli_load_format_parse,
                "dummy: shapes and formats from config.json alone (auto)"),
        ARGS_U64("--seed", "N", &o.dummy_seed, "seed of the dummy weights (0)"),
    };
    const struct args_spec spec = {"tern inspect", "DIR [--json] [--check] [--load-format "
                                   "auto|dummy] [--seed N]", opts, ARRAY_LEN(opts), NULL};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (!dir)
        return args_fail(&spec, "missing DIR");
    o.header_only = !check;
    char err[1024];
    if (inspect_dir(dir, &o, json, stdout, err, sizeof(err)) < 0) {
        fprintf(stderr, "tern inspect: %s\n", err);
        return 1;
    }
    return 0;
}
