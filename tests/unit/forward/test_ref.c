/* End to end against an independent float64 numpy reference (ref_forward.py, written from
 * MODEL.md): `tern make-tiny-model` (f32 and bf16), `tern generate --dump-logits --dump-mtp`
 * over a 150-token prompt (chunked GDN across chunk boundaries) plus decode steps, then the
 * script recomputes every row; `--spec 3` must print the same tokens. Skipped when the tern
 * binary or /usr/bin/python3 + numpy is missing. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int run(const char *cmd)
{
    fprintf(stderr, "+ %s\n", cmd);
    int rc = system(cmd);
    return rc == 0 ? 0 : 1;
}

int main(void)
{
    const char *bd = getenv("TERN_BUILD_DIR"), *sd = getenv("TERN_SOURCE_DIR");
    if (!bd || !sd)
        TEST_SKIP("TERN_BUILD_DIR / TERN_SOURCE_DIR not set");
    char tern[1024], script[1024], cmd[8192];
    snprintf(tern, sizeof(tern), "%s/bin/tern", bd);
    snprintf(script, sizeof(script), "%s/tests/unit/forward/ref_forward.py", sd);
    if (access(tern, X_OK) != 0)
        TEST_SKIP("tern binary not built");
    if (system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
        TEST_SKIP("/usr/bin/python3 with numpy not available");
    char dir[] = "/tmp/tern_fwdref_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0);
        return test_result();
    }
    char ids[2048] = "";
    for (int i = 0; i < 150; i++) {
        char b[16];
        snprintf(b, sizeof(b), "%s%d", i ? "," : "", (i * 37 + 11) % 500);
        strcat(ids, b);
    }
    const char *fmts[] = { "f32", "bf16" };
    for (int f = 0; f < 2; f++) {
        snprintf(cmd, sizeof(cmd),
                 "%s make-tiny-model %s/%s --format %s --seed %d --layers LFLLF > /dev/null", tern,
                 dir, fmts[f], fmts[f], 5 + f);
        CHECK_EQ_INT(run(cmd), 0);
        snprintf(cmd, sizeof(cmd),
                 "%s generate --model %s/%s --ids %s --max-tokens 20 --ignore-eos --threads 2 "
                 "--dump-logits %s/%s.bin --dump-mtp %s/%s.mtp > %s/%s.out",
                 tern, dir, fmts[f], ids, dir, fmts[f], dir, fmts[f], dir, fmts[f]);
        CHECK_EQ_INT(run(cmd), 0);
        snprintf(cmd, sizeof(cmd),
                 "(echo %s; cat %s/%s.out) > %s/%s.ids && /usr/bin/python3 %s %s/%s %s/%s.ids "
                 "%s/%s.bin %s/%s.mtp",
                 ids, dir, fmts[f], dir, fmts[f], script, dir, fmts[f], dir, fmts[f], dir, fmts[f],
                 dir, fmts[f]);
        CHECK_EQ_INT(run(cmd), 0);
        // greedy speculative decoding with MTP drafts prints the same tokens
        snprintf(cmd, sizeof(cmd),
                 "%s generate --model %s/%s --ids %s --max-tokens 20 --ignore-eos --spec 3 "
                 "> %s/%s.spec && cmp %s/%s.out %s/%s.spec",
                 tern, dir, fmts[f], ids, dir, fmts[f], dir, fmts[f], dir, fmts[f]);
        CHECK_EQ_INT(run(cmd), 0);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    (void)run(cmd);  // best effort: a leftover temp dir is not a test failure
    return test_result();
}
