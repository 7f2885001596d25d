/* tern tokenize: text on stdin -> token ids on stdout (space separated, or a JSON array). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "text/tokenizer.h"

int tern_cmd_tokenize(int argc, char **argv);
const char tern_cmd_tokenize_help[] =
    "encode stdin to token ids: --tokenizer FILE (or $TERN_TOKENIZER) [--json]";

static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) {
            if (ferror(f)) {
                free(buf);
                return NULL;
            }
            break;
        }
        cap *= 2;
        char *p = realloc(buf, cap);
        if (!p)
            free(buf);
        buf = p;
    }
    *len = n;
    return buf;
}

int tern_cmd_tokenize(int argc, char **argv)
{
    const char *path = getenv("TERN_TOKENIZER");
    bool json = false;
    const struct args_opt opts[] = {
        ARGS_STR("--tokenizer", "FILE", &path, "tokenizer.json (default $TERN_TOKENIZER)"),
        ARGS_BOOL("--json", &json, "print a JSON array instead of space-separated ids"),
    };
    const struct args_spec spec = {"tern tokenize", "--tokenizer FILE [--json] < text", opts,
                                   ARRAY_LEN(opts), NULL};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (!path)
        return args_fail(&spec, "--tokenizer FILE is required");
    char err[256];
    struct tokenizer *tok = tokenizer_create_from_file(path, err, sizeof(err));
    if (!tok) {
        fprintf(stderr, "tern tokenize: %s\n", err);
        return 1;
    }
    size_t len = 0;
    char *text = read_all(stdin, &len);
    if (!text) {
        fprintf(stderr, "tern tokenize: cannot read stdin\n");
        tokenizer_destroy(tok);
        return 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = tokenizer_encode(tok, text, len, &ids, &n);
    if (rc < 0) {
        fprintf(stderr, "tern tokenize: %s\n", err_str(rc));
    } else {
        fputs(json ? "[" : "", stdout);
        for (size_t i = 0; i < n; i++)
            printf(i ? (json ? ",%d" : " %d") : "%d", ids[i]);
        fputs(json ? "]\n" : "\n", stdout);
    }
    free(ids);
    free(text);
    tokenizer_destroy(tok);
    return rc < 0 ? 1 : 0;
}
