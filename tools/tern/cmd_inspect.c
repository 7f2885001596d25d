/* tern inspect DIR [--json] [--check] [--load-format auto|dummy] [--seed N] [--tokenizer TDIR]:
 * summarize a checkpoint (config, tensors and bytes per group, quantization per module class, MTP).
 * Header-only by default (also with dummy: shapes and formats from config.json alone, nothing
 * allocated); --check maps the data and validates every offset, or with dummy builds the random
 * weights; --tokenizer TDIR also checks that TDIR/tokenizer.json loads and that its ids fit the
 * model's vocab_size (run.sh does this before starting anything). Errors: one line on stderr,
 * exit 1 (2 for usage). */
#include "common/args.h"
#include "common/xalloc.h"
#include "cli.h"
#include "model/config_load.h"
#include "model/inspect.h"
#include "model/model_load.h"
#include "text/tokenizer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_inspect(int argc, char **argv);
const char tern_cmd_inspect_help[] =
    "summarize a checkpoint: inspect DIR [--json] [--check] [--load-format auto|dummy]";

/* The tokenizer in tok_dir loads and its ids fit the model's vocab_size: one line on stdout
 * (unless json), or one on stderr and 1. */
static int check_tokenizer(const char *dir, const char *tok_dir, bool json)
{
    char path[4096], err[1024];
    struct model_config c;
    if (config_load(&c, dir, err, sizeof(err)) < 0) {
        fprintf(stderr, "tern inspect: %s\n", err);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/tokenizer.json", tok_dir);
    struct tokenizer *tok = tokenizer_create_from_file(path, err, sizeof(err));
    if (!tok) {
        fprintf(stderr, "tern inspect: tokenizer %s: %s (give the directory of the model's "
                "tokenizer.json)\n", path, err);
        return 1;
    }
    const size_t n = tokenizer_vocab_size(tok);
    tokenizer_destroy(tok);
    if (n > (size_t)c.vocab_size) {
        fprintf(stderr, "tern inspect: tokenizer %s has %zu ids, the model only %d (vocab_size in "
                "%s/config.json): not this model's tokenizer\n", path, n, c.vocab_size, dir);
        return 1;
    }
    if (!json)
        printf("tokenizer=%s ids=%zu vocab_size=%d fits=yes\n", path, n, c.vocab_size);
    return 0;
}

int tern_cmd_inspect(int argc, char **argv)
{
    const char *dir = NULL, *tok_dir = NULL;
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
        ARGS_STR("--tokenizer", "TDIR", &tok_dir,
                 "also check that TDIR/tokenizer.json loads and fits the model's vocab_size"),
    };
    const struct args_spec spec = {"tern inspect",
                                   "DIR [--json] [--check] [--load-format auto|dummy] [--seed N] "
                                   "[--tokenizer TDIR]",
                                   opts, ARRAY_LEN(opts), NULL};
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
    return tok_dir ? check_tokenizer(dir, tok_dir, json) : 0;
}
