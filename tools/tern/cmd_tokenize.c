/* tern tokenize: text on stdin -> token ids on stdout (space separated, or a JSON array). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
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
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            fprintf(stderr, "usage: tern tokenize --tokenizer FILE [--json] < text\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "tern tokenize: --tokenizer FILE is required\n");
        return 2;
    }
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
