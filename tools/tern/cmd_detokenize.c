/* tern detokenize: token ids on stdin (separated by spaces, commas, newlines; a JSON array works)
 * -> text on stdout. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "text/tokenizer.h"

int tern_cmd_detokenize(int argc, char **argv);
const char tern_cmd_detokenize_help[] =
    "decode token ids on stdin to text: --tokenizer FILE (or $TERN_TOKENIZER) [--skip-special]";

int tern_cmd_detokenize(int argc, char **argv)
{
    const char *path = getenv("TERN_TOKENIZER");
    bool skip_special = false;
    const struct args_opt opts[] = {
        ARGS_STR("--tokenizer", "FILE", &path, "tokenizer.json (default $TERN_TOKENIZER)"),
        ARGS_BOOL("--skip-special", &skip_special, "leave special tokens out of the text"),
    };
    const struct args_spec spec = {"tern detokenize", "--tokenizer FILE [--skip-special] < ids",
                                   opts, ARRAY_LEN(opts), NULL};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (!path)
        return args_fail(&spec, "--tokenizer FILE is required");
    const int flags = skip_special ? TOKENIZER_DECODE_SKIP_SPECIAL : 0;
    size_t cap = 1024, n = 0;
    int32_t *ids = malloc(cap * sizeof(*ids));
    int c, bad = 0;
    long v = 0;
    int in_num = 0, neg = 0;
    while (ids && (c = getchar()) != EOF) {
        if (isdigit(c)) {
            v = v * 10 + (c - '0');
            in_num = 1;
            if (v > INT32_MAX)
                bad = 1;
            continue;
        }
        if (c == '-' && !in_num) {
            neg = 1;
            continue;
        }
        if (in_num) {
            if (n == cap) {
                cap *= 2;
                int32_t *p = realloc(ids, cap * sizeof(*ids));
                if (!p) {
                    free(ids);
                    ids = NULL;
                    break;
                }
                ids = p;
            }
            ids[n++] = (int32_t)(neg ? -v : v);
        }
        if (!isspace(c) && c != ',' && c != '[' && c != ']')
            bad = 1;
        v = 0;
        in_num = neg = 0;
    }
    if (ids && in_num && n < cap)
        ids[n++] = (int32_t)(neg ? -v : v);
    else if (ids && in_num)
        bad = 1;
    if (!ids || bad) {
        fprintf(stderr, "tern detokenize: stdin must hold integer ids\n");
        free(ids);
        return 1;
    }
    char err[256];
    struct tokenizer *tok = tokenizer_create_from_file(path, err, sizeof(err));
    if (!tok) {
        fprintf(stderr, "tern detokenize: %s\n", err);
        free(ids);
        return 1;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = tokenizer_decode(tok, ids, n, flags, &text, &len);
    if (rc < 0)
        fprintf(stderr, "tern detokenize: %s\n", err_str(rc));
    else
        fwrite(text, 1, len, stdout);
    free(text);
    free(ids);
    tokenizer_destroy(tok);
    return rc < 0 ? 1 : 0;
}
