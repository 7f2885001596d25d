/* `tern tokenize` / `tern detokenize` end to end: the CLI's ids for a corpus file equal the
 * library's, --json prints the same ids as an array, and detokenize turns them back into the NFC
 * text. Skips when tokenizer.json or the tern binary is missing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "text/tokenizer.h"
#include "tok_test_util.h"

/* Run cmd, return its stdout (malloc'd) or NULL. */
static char *run(const char *cmd, size_t *len)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[n] = '\0';
    int rc = pclose(p);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int main(void)
{
    char tj[1024], dir[1024], tern[1200], cmd[8192];
    if (tt_paths(tj, sizeof(tj), dir, sizeof(dir)) < 0)
        TEST_SKIP("tokenizer.json not found (run scripts/setup.sh)");
    const char *bd = getenv("TERN_BUILD_DIR");
    snprintf(tern, sizeof(tern), "%s/bin/tern", bd ? bd : "build");
    if (access(tern, X_OK) != 0)
        TEST_SKIP("tern binary not built");
    struct tokenizer *tok = tokenizer_create_from_file(tj, NULL, 0);
    CHECK(tok != NULL);
    if (!tok)
        return test_result();
    size_t len;
    char *text = tt_read_corpus(dir, "special.txt", &len);
    CHECK(text != NULL);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_EQ_INT(tokenizer_encode(tok, text, len, &ids, &n), 0);
    char want[65536];
    size_t w = 0;
    for (size_t i = 0; i < n && w + 16 < sizeof(want); i++)
        w += (size_t)snprintf(want + w, sizeof(want) - w, i ? " %d" : "%d", ids[i]);
    want[w++] = '\n';
    want[w] = '\0';

    snprintf(cmd, sizeof(cmd), "'%s' tokenize --tokenizer '%s' < '%s/special.txt'", tern, tj, dir);
    size_t ol;
    char *out = run(cmd, &ol);
    CHECK_STREQ(out, want);
    free(out);

    snprintf(cmd, sizeof(cmd), "'%s' tokenize --tokenizer '%s' --json < '%s/special.txt'", tern, tj,
             dir);
    out = run(cmd, &ol);
    CHECK(out && out[0] == '[' && strstr(out, "]\n"));
    for (char *c = out; c && *c; c++)
        if (*c == ',')
            *c = ' ';
    if (out)
        CHECK(strncmp(out + 1, want, w - 1) == 0);
    free(out);

    snprintf(cmd, sizeof(cmd),
             "'%s' tokenize --tokenizer '%s' < '%s/special.txt' | '%s' detokenize --tokenizer '%s'",
             tern, tj, dir, tern, tj);
    out = run(cmd, &ol);
    CHECK(out && ol == len && memcmp(out, text, len) == 0); /* special.txt is ASCII: NFC = itself */
    free(out);

    snprintf(cmd, sizeof(cmd),
             "echo '151644 872 151645' | '%s' detokenize --tokenizer '%s' --skip-special", tern,
             tj);
    out = run(cmd, &ol);
    CHECK_STREQ(out, "user");
    free(out);

    snprintf(cmd, sizeof(cmd), "echo 'x' | '%s' detokenize --tokenizer '%s' 2>/dev/null", tern, tj);
    CHECK(run(cmd, &ol) == NULL); /* non-zero exit */
    free(ids);
    free(text);
    tokenizer_destroy(tok);
    return test_result();
}
