/* dev driver: encode each file, print ids per line */
#include <stdio.h>
#include <stdlib.h>
#include "text/tokenizer.h"
int main(int argc, char **argv)
{
    char err[256];
    struct tokenizer *t = tokenizer_create_from_file(argv[1], err, sizeof err);
    if (!t) { fprintf(stderr, "%s\n", err); return 1; }
    for (int a = 2; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
        char *b = malloc(n + 1); if (fread(b, 1, n, f) != (size_t)n) return 1; fclose(f);
        int32_t *ids; size_t k;
        if (tokenizer_encode(t, b, n, &ids, &k)) return 1;
        for (size_t i = 0; i < k; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n"); free(ids); free(b);
    }
    tokenizer_destroy(t);
    return 0;
}
