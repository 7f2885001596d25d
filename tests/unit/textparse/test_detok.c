/* Streaming detokenizer on the real Qwen3 vocabulary: for every corpus file (the invalid UTF-8
 * one included) feeding ids one by one gives only complete UTF-8 chunks whose concatenation equals
 * tokenizer_decode(); hand-made byte-token sequences check hold-back and the final U+FFFD.
 * Skips when .deps (tokenizer.json) is missing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "text/detok.h"
#include "text/tokenizer.h"
#include "tok_test_util.h"

static int32_t byte_tok(struct tokenizer *tok, int b)
{
    /* the vocabulary entry whose raw bytes are exactly {b} */
    for (size_t id = 0; id < tokenizer_vocab_size(tok); id++) {
        size_t len;
        const char *s = tokenizer_id_to_bytes(tok, (int32_t)id, &len);
        if (s && len == 1 && (uint8_t)s[0] == b && !tokenizer_is_added(tok, (int32_t)id))
            return (int32_t)id;
    }
    return -1;
}

static void stream_equals_decode(struct tokenizer *tok, const int32_t *ids, size_t n, int flags,
                                 const char *label)
{
    struct detok *d = detok_create(tok, flags);
    size_t cap = 64, len = 0;
    char *acc = malloc(cap);
    int bad_chunks = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *t;
        size_t l;
        if (i < n)
            CHECK_EQ_INT(detok_feed(d, ids[i], &t, &l), 0);
        else
            CHECK_EQ_INT(detok_flush(d, &t, &l), 0);
        /* every chunk is complete UTF-8: repairing it changes nothing */
        char *fix = malloc(l * 3 + 1);
        size_t fl = tokenizer_utf8_repair(t, l, true, fix, NULL);
        if (fl != l || memcmp(fix, t, l) != 0)
            bad_chunks++;
        free(fix);
        if (len + l + 1 > cap) {
            cap = (len + l + 1) * 2;
            acc = realloc(acc, cap);
        }
        memcpy(acc + len, t, l);
        len += l;
    }
    char *want = NULL;
    size_t wl = 0;
    CHECK_EQ_INT(tokenizer_decode(tok, ids, n, flags, &want, &wl), 0);
    CHECK_EQ_INT(bad_chunks, 0);
    int same = want && wl == len && memcmp(want, acc, len) == 0;
    CHECK(same);
    if (!same || bad_chunks)
        fprintf(stderr, "  detok mismatch on %s (flags %d)\n", label, flags);
    free(want);
    free(acc);
    detok_destroy(d);
}

static void test_corpus(struct tokenizer *tok, const char *dir)
{
    DIR *dd = opendir(dir);
    CHECK(dd != NULL);
    if (!dd)
        return;
    struct dirent *de;
    int files = 0;
    while ((de = readdir(dd))) {
        if (de->d_name[0] == '.')
            continue;
        size_t len;
        char *text = tt_read_corpus(dir, de->d_name, &len);
        if (!text)
            continue;
        int32_t *ids;
        size_t n;
        CHECK_EQ_INT(tokenizer_encode(tok, text, len, &ids, &n), 0);
        stream_equals_decode(tok, ids, n, 0, de->d_name);
        stream_equals_decode(tok, ids, n, TOKENIZER_DECODE_SKIP_SPECIAL, de->d_name);
        /* reversed order makes many broken sequences: still equal to decode */
        for (size_t i = 0; i < n / 2; i++) {
            int32_t t = ids[i];
            ids[i] = ids[n - 1 - i];
            ids[n - 1 - i] = t;
        }
        stream_equals_decode(tok, ids, n, 0, de->d_name);
        free(ids);
        free(text);
        files++;
    }
    closedir(dd);
    CHECK(files >= 10);
}

static void test_bytes(struct tokenizer *tok)
{
    int32_t f0 = byte_tok(tok, 0xF0), x9f = byte_tok(tok, 0x9F), x98 = byte_tok(tok, 0x98),
            x80 = byte_tok(tok, 0x80), e2 = byte_tok(tok, 0xE2), a = byte_tok(tok, 'A');
    CHECK(f0 >= 0 && x9f >= 0 && x98 >= 0 && x80 >= 0 && e2 >= 0 && a >= 0);
    struct detok *d = detok_create(tok, 0);
    const char *t;
    size_t l;
    detok_feed(d, f0, &t, &l);
    CHECK_EQ_INT(l, 0);
    detok_feed(d, x9f, &t, &l);
    CHECK_EQ_INT(l, 0);
    detok_feed(d, x98, &t, &l);
    CHECK_EQ_INT(l, 0);
    detok_feed(d, x80, &t, &l);
    CHECK(l == 4 && memcmp(t, "\xF0\x9F\x98\x80", 4) == 0);
    /* dangling partial at the end -> one U+FFFD */
    detok_feed(d, f0, &t, &l);
    detok_feed(d, x9f, &t, &l);
    CHECK_EQ_INT(l, 0);
    detok_flush(d, &t, &l);
    CHECK(l == 3 && memcmp(t, "\xEF\xBF\xBD", 3) == 0);
    /* a broken sequence is replaced as soon as it is known to be broken */
    detok_reset(d);
    detok_feed(d, e2, &t, &l);
    CHECK_EQ_INT(l, 0);
    detok_feed(d, a, &t, &l);
    CHECK(l == 4 && memcmp(t,
                           "\xEF\xBF\xBD"
                           "A",
                           4) == 0);
    /* unknown id: error, state kept */
    CHECK_EQ_INT(detok_feed(d, -5, &t, &l), -1015);
    CHECK_EQ_INT(detok_feed(d, (int32_t)tokenizer_vocab_size(tok), &t, &l), -1015);
    /* a special token with skip: nothing, and the bytes around it join */
    detok_destroy(d);
    d = detok_create(tok, TOKENIZER_DECODE_SKIP_SPECIAL);
    detok_feed(d, f0, &t, &l);
    detok_feed(d, x9f, &t, &l);
    detok_feed(d, tokenizer_eos_id(tok), &t, &l);
    CHECK_EQ_INT(l, 0);
    detok_feed(d, x98, &t, &l);
    detok_feed(d, x80, &t, &l);
    CHECK(l == 4 && memcmp(t, "\xF0\x9F\x98\x80", 4) == 0);
    detok_destroy(d);
    detok_destroy(NULL);
}

/* Regression (fuzz/UBSan finding): a flush of a fresh detok, or a first feed that brings no
 * bytes (a special id under SKIP_SPECIAL), passed NULL to memcpy. Each gives "" (not NULL). */
static void test_fresh(struct tokenizer *tok)
{
    const char *t = NULL;
    size_t l = 99;
    struct detok *d = detok_create(tok, 0);
    CHECK_EQ_INT(detok_flush(d, &t, &l), 0);
    CHECK(t != NULL && l == 0 && t[0] == '\0');
    detok_destroy(d);
    d = detok_create(tok, TOKENIZER_DECODE_SKIP_SPECIAL);
    t = NULL;
    l = 99;
    CHECK_EQ_INT(detok_feed(d, tokenizer_eos_id(tok), &t, &l), 0);
    CHECK(t != NULL && l == 0);
    CHECK_EQ_INT(detok_flush(d, &t, &l), 0);
    CHECK(t != NULL && l == 0 && t[0] == '\0');
    int32_t a = byte_tok(tok, 'A');
    CHECK_EQ_INT(detok_feed(d, a, &t, &l), 0);
    CHECK(l == 1 && t[0] == 'A');
    detok_destroy(d);
    /* the empty sequence streams to what decode gives */
    stream_equals_decode(tok, NULL, 0, 0, "empty");
}

int main(void)
{
    char dir[1024];
    struct tokenizer *tok = tt_load(dir, sizeof dir);
    CHECK(tok != NULL);
    if (!tok)
        return test_result();
    test_fresh(tok);
    test_bytes(tok);
    test_corpus(tok, dir);
    tokenizer_destroy(tok);
    return test_result();
}
