/* Tokenizer unit tests on the real Qwen3 tokenizer.json: fixed facts about the vocabulary (ids
 * printed in tokenizer.json itself), WHATWG UTF-8 repair cases from the Encoding Standard,
 * decode(encode(x)) == NFC(x) over the corpus, skip_special, and concurrent encodes equal to serial
 * ones. Parity with the JS reference is test_tokenizer_parity. Skips when .deps is missing. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "test.h"
#include "text/tokenizer.h"
#include "tok_test_util.h"
#include "tokenizer_internal.h"

static void test_vocab(struct tokenizer *tok)
{
    CHECK(tokenizer_vocab_size(tok) == 151669);
    CHECK_EQ_INT(tokenizer_eos_id(tok), 151645);
    CHECK_EQ_INT(tokenizer_endoftext_id(tok), 151643);
    CHECK_EQ_INT(tokenizer_im_start_id(tok), 151644);
    CHECK_EQ_INT(tokenizer_token_to_id(tok, "<think>"), 151667);
    CHECK_EQ_INT(tokenizer_token_to_id(tok, "!"), 0);
    CHECK_EQ_INT(tokenizer_token_to_id(tok, "no-such-token-xyz"), -1);
    CHECK_STREQ(tokenizer_id_to_token(tok, 151657), "<tool_call>");
    CHECK(tokenizer_id_to_token(tok, -1) == NULL);
    CHECK(tokenizer_id_to_token(tok, 151669) == NULL);
    CHECK(tokenizer_is_special(tok, 151645));
    CHECK(!tokenizer_is_special(tok, 151667));
    CHECK(tokenizer_is_added(tok, 151667));
    CHECK(!tokenizer_is_added(tok, 0));
    /* "Ġ" is the byte-level form of a space: its bytes are " " */
    int32_t sp = tokenizer_token_to_id(tok, "\xc4\xa0");
    size_t len = 0;
    const char *b = tokenizer_id_to_bytes(tok, sp, &len);
    CHECK(b && len == 1 && b[0] == ' ');
    /* the byte token for 0xff decodes to exactly that byte */
    int32_t ff = tokenizer_token_to_id(tok, "\xc3\xbf");
    b = tokenizer_id_to_bytes(tok, ff, &len);
    CHECK(b && len == 1 && (uint8_t)b[0] == 0xff);
}

struct repair_case {
    const char *in;
    size_t len;
    const char *want; /* with "\xEF\xBF\xBD" for U+FFFD */
};

static void test_repair(void)
{
#define R "\xEF\xBF\xBD"
    /* expected outputs follow the Encoding Standard's UTF-8 decoder (one U+FFFD per maximal
     * subpart); these byte cases are the ones listed in Unicode §3.9 Table 3-8 */
    static const struct repair_case cases[] = {
        {"abc", 3, "abc"},
        {"\xC0\xAF", 2, R R},
        {"\xE0\x80\xAF", 3, R R R},
        {"\xF0\x80\x80\xAF", 4, R R R R},
        {"\xED\xA0\x80", 3, R R R},
        {"\xF4\x90\x80\x80", 4, R R R R},
        {"\xE2\x82", 2, R},
        {"\xE2\x82"
         "A",
         3, R "A"},
        {"\xF0\x9F\x98", 3, R},
        {"\xF0\x9F\x98\x80", 4, "\xF0\x9F\x98\x80"},
        {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", 13, "a" R R R "b" R "c" R R "d"},
        {"\xFF\xFE", 2, R R},
        {"\xEF\xBB\xBF"
         "x",
         4,
         "\xEF\xBB\xBF"
         "x"},
        {"\x00z", 2, "\x00z"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[64];
        size_t used = 0;
        size_t n = tokenizer_utf8_repair(cases[i].in, cases[i].len, true, out, &used);
        size_t wl = cases[i].len == 2 && cases[i].in[0] == 0 ? 2 : strlen(cases[i].want);
        CHECK(n == wl && memcmp(out, cases[i].want, wl) == 0);
        CHECK(used == cases[i].len);
        if (n != wl || memcmp(out, cases[i].want, wl) != 0)
            fprintf(stderr, "  repair case %zu failed\n", i);
    }
    /* streaming mode holds back an incomplete tail but not an invalid one */
    char out[32];
    size_t used;
    size_t n = tokenizer_utf8_repair("ab\xE2\x82", 4, false, out, &used);
    CHECK(n == 2 && used == 2);
    n = tokenizer_utf8_repair("ab\xE2\x41", 4, false, out, &used);
    CHECK(n == 6 && used == 4 && memcmp(out, "ab" R "A", 6) == 0);
    n = tokenizer_utf8_repair("\xF0\x9F", 2, false, out, &used);
    CHECK(n == 0 && used == 0);
#undef R
}

/* tok_utf8_valid (the fast path of encode) agrees with the repair: valid iff repair is identity.
 * Random short strings over bytes that matter (ASCII, continuations, every lead-byte class). */
static void test_valid_matches_repair(void)
{
    static const uint8_t alphabet[] = {0x41, 0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0,
                                       0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED,
                                       0xEE, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF};
    uint64_t s = 99;
    int bad = 0, n_valid = 0;
    for (int iter = 0; iter < 200000; iter++) {
        char in[6], out[18];
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        size_t n = s % 6;
        for (size_t i = 0; i < n; i++)
            in[i] = (char)alphabet[(s >> (8 + 5 * i)) % sizeof(alphabet)];
        size_t o = tokenizer_utf8_repair(in, n, true, out, NULL);
        bool same = o == n && memcmp(in, out, n) == 0;
        n_valid += same;
        if (same != tok_utf8_valid(in, n))
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(n_valid > 1000);
}

static void test_roundtrip(struct tokenizer *tok, const char *dir)
{
    static const char *files[] = {"code.txt",     "cjk.txt",          "emoji.txt",  "combining.txt",
                                  "rtl.txt",      "whitespace.txt",   "digits.txt", "special.txt",
                                  "longword.txt", "contractions.txt", "mixed.txt"};
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        size_t len;
        char *text = tt_read_corpus(dir, files[f], &len);
        CHECK(text != NULL);
        if (!text)
            continue;
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_EQ_INT(tokenizer_encode(tok, text, len, &ids, &n), 0);
        char *dec = NULL;
        size_t dlen = 0;
        CHECK_EQ_INT(tokenizer_decode(tok, ids, n, 0, &dec, &dlen), 0);
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t nl = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len,
                                           &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        CHECK(nl >= 0);
        int same = nl >= 0 && (size_t)nl == dlen && memcmp(nfc, dec, dlen) == 0;
        CHECK(same);
        if (!same)
            fprintf(stderr, "  roundtrip %s: %zu bytes vs NFC %zd\n", files[f], dlen, (ssize_t)nl);
        free(nfc);
        free(dec);
        free(ids);
        free(text);
    }
}

static void test_specials(struct tokenizer *tok)
{
    const char *s = "<|im_start|>user\nhi<think>x</think><|im_end|>";
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_EQ_INT(tokenizer_encode(tok, s, strlen(s), &ids, &n), 0);
    CHECK(n >= 5);
    CHECK_EQ_INT(ids[0], 151644);
    CHECK_EQ_INT(ids[n - 1], 151645);
    char *out = NULL;
    size_t len = 0;
    CHECK_EQ_INT(tokenizer_decode(tok, ids, n, 0, &out, &len), 0);
    CHECK_STREQ(out, s);
    free(out);
    CHECK_EQ_INT(tokenizer_decode(tok, ids, n, TOKENIZER_DECODE_SKIP_SPECIAL, &out, &len), 0);
    CHECK_STREQ(out, "user\nhi<think>x</think>");
    free(out);
    int32_t bad = 151669;
    CHECK_EQ_INT(tokenizer_decode(tok, &bad, 1, 0, &out, &len), -1015);
    free(ids);
    /* split_special: control tokens in text become plain text, non-special added ones stay */
    int32_t *ids2 = NULL;
    size_t n2 = 0;
    CHECK_EQ_INT(
        tokenizer_encode_flags(tok, s, strlen(s), TOKENIZER_ENCODE_SPLIT_SPECIAL, &ids2, &n2), 0);
    int n_special = 0, n_think = 0;
    for (size_t i = 0; i < n2; i++) {
        n_special += tokenizer_is_special(tok, ids2[i]);
        n_think += ids2[i] == 151667 || ids2[i] == 151668;
    }
    CHECK_EQ_INT(n_special, 0);
    CHECK_EQ_INT(n_think, 2);
    CHECK(n2 > n);
    CHECK_EQ_INT(tokenizer_decode(tok, ids2, n2, 0, &out, &len), 0);
    CHECK_STREQ(out, s);
    free(out);
    free(ids2);
    /* empty input */
    CHECK_EQ_INT(tokenizer_encode(tok, "", 0, &ids, &n), 0);
    CHECK(n == 0 && ids == NULL);
    /* a byte token alone is an incomplete sequence: decodes to U+FFFD */
    int32_t e2 = tokenizer_token_to_id(tok, "\xc3\xa2"); /* byte 0xE2 */
    CHECK_EQ_INT(tokenizer_decode(tok, &e2, 1, 0, &out, &len), 0);
    CHECK_STREQ(out, "\xEF\xBF\xBD");
    free(out);
}

struct thr_arg {
    struct tokenizer *tok;
    const char *text;
    size_t len;
    const int32_t *want;
    size_t n_want;
    int bad;
};

static void *thr_main(void *p)
{
    struct thr_arg *a = p;
    for (int rep = 0; rep < 20; rep++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tokenizer_encode(a->tok, a->text, a->len, &ids, &n) != 0 || n != a->n_want ||
            memcmp(ids, a->want, n * sizeof(*ids)) != 0)
            a->bad++;
        free(ids);
    }
    return NULL;
}

static void test_threads(const char *tj, const char *dir)
{
    /* a fresh tokenizer so that the cache starts empty and threads race to fill it */
    struct tokenizer *ref = tokenizer_create_from_file(tj, NULL, 0);
    struct tokenizer *tok = tokenizer_create_from_file(tj, NULL, 0);
    CHECK(ref && tok);
    if (!ref || !tok)
        goto out;
    size_t len;
    char *text = tt_read_corpus(dir, "mixed.txt", &len);
    size_t l2;
    char *t2 = tt_read_corpus(dir, "code.txt", &l2);
    CHECK(text && t2);
    if (!text || !t2) {
        free(text);
        free(t2);
        goto out;
    }
    int32_t *w1, *w2;
    size_t n1, n2;
    CHECK_EQ_INT(tokenizer_encode(ref, text, len, &w1, &n1), 0);
    CHECK_EQ_INT(tokenizer_encode(ref, t2, l2, &w2, &n2), 0);
    pthread_t th[4];
    struct thr_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thr_arg){
            tok, i % 2 ? t2 : text, i % 2 ? l2 : len, i % 2 ? w2 : w1, i % 2 ? n2 : n1, 0};
        pthread_create(&th[i], NULL, thr_main, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(args[i].bad, 0);
    }
    free(w1);
    free(w2);
    free(text);
    free(t2);
out:
    tokenizer_destroy(ref);
    tokenizer_destroy(tok);
}

int main(void)
{
    char tj[1024], dir[1024];
    if (tt_paths(tj, sizeof(tj), dir, sizeof(dir)) < 0)
        TEST_SKIP("tokenizer.json not found (run scripts/setup.sh)");
    char err[256] = "";
    struct tokenizer *tok = tokenizer_create_from_file(tj, err, sizeof(err));
    if (!tok) {
        fprintf(stderr, "load failed: %s\n", err);
        return 1;
    }
    test_vocab(tok);
    test_repair();
    test_valid_matches_repair();
    test_roundtrip(tok, dir);
    test_specials(tok);
    tokenizer_destroy(tok);
    test_threads(tj, dir);
    /* load errors are reported, not crashed on */
    CHECK(tokenizer_create_from_file("/nonexistent/tokenizer.json", err, sizeof(err)) == NULL);
    CHECK(strstr(err, "nonexistent") != NULL);
    CHECK(tokenizer_create_from_json("{\"model\":{}}", 12, err, sizeof(err)) == NULL);
    tokenizer_destroy(NULL);
    return test_result();
}
