/* Scratch fuzzer (not built by CMake): random byte mutations of templates and chat requests,
 * rendered under ASan/UBSan to look for crashes. Build by hand, see dev/jinja/README.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"
#include "text/jinja.h"

static char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)l + 1);
    *n = fread(b, 1, (size_t)l, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

static void mutate(char *s, size_t n, unsigned *seed)
{
    static const char pool[] = "{}%#-+|.,:()[]'\"\\ \nabcxyz0123~*/<>=!";
    int k = 1 + rand_r(seed) % 4;
    for (int i = 0; i < k && n; i++) {
        size_t at = (size_t)rand_r(seed) % n;
        s[at] = pool[rand_r(seed) % (int)(sizeof(pool) - 1)];
    }
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int iters = atoi(argv[1]);
    size_t tn, rn;
    char *tpl = slurp(argv[2], &tn), *req = slurp(argv[3], &rn);
    if (!tpl || !req)
        return 2;
    unsigned seed = 1234;
    int parsed = 0, rendered = 0;
    for (int i = 0; i < iters; i++) {
        char *t = malloc(tn + 1), *r = malloc(rn + 1);
        memcpy(t, tpl, tn + 1);
        memcpy(r, req, rn + 1);
        if (i % 2)
            mutate(t, tn, &seed);
        else
            mutate(r, rn, &seed);
        struct jinja_error err;
        struct chat_template *ct = chat_template_create(t, tn, &err);
        if (ct) {
            parsed++;
            char *out = NULL;
            size_t on;
            if (chat_template_render(ct, r, rn, NULL, &out, &on, &err) == 0)
                rendered++;
            free(out);
            chat_template_destroy(ct);
        }
        free(t);
        free(r);
    }
    printf("iters=%d parsed=%d rendered=%d\n", iters, parsed, rendered);
    free(tpl);
    free(req);
    return 0;
}
