/* Parity with the JS reference (@lenml/tokenizers, a transformers.js fork): every corpus file plus
 * a seeded random mix of tricky fragments (whitespace runs, combining marks, invalid bytes, pieces
 * of special tokens) is encoded by ref_encode.mjs under node and by us; the ids must be identical.
 * Skips (77) only when node or .deps is missing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "text/tokenizer.h"
#include "tok_test_util.h"

#define MAX_FILES 64

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Deterministic mix of fragments that stress the split regex, NFC and the added-token matcher. */
static void write_fuzz(const char *path, unsigned seed, size_t n_frag)
{
    static const char *frags[] = {
        " ",
        "  ",
        "   ",
        "\n",
        "\n\n",
        "\r\n",
        "\t",
        "\xc2\xa0",
        "\xe3\x80\x80",
        "\xef\xbb\xbf",
        "a",
        "Z",
        "don",
        "'t",
        "'S",
        "'ll",
        "'LL",
        "\xc5\xbf",
        "hello",
        "World",
        "e",
        "\xcc\x81",
        "\xcc\x88",
        "\xe1\x84\x80",
        "\xe1\x85\xa1",
        "\xe4\xbd\xa0",
        "\xe5\xa5\xbd",
        "1",
        "23",
        "\xd9\xa3",
        "\xef\xbc\x95",
        ".",
        ",",
        "!?",
        "...",
        "->",
        "{",
        "}",
        "\xf0\x9f\x98\x80",
        "\xe2\x80\x8d",
        "\xf0\x9f\x91\xa8",
        "\xff",
        "\x80",
        "\xe2\x82",
        "\xf0\x9f",
        "\xed\xa0\x80",
        "<",
        "|",
        ">",
        "<|",
        "|>",
        "im_start",
        "<|im_end|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "\xd7\xa9",
        "\xd8\xb3",
        "\xe2\x80\xae",
        "\x00",
        "_",
        "#",
        "$",
        "\\",
        "\"",
        "`",
        /* NFC around inert code points: Hangul LV + T jamo, kana + voicing mark, singletons */
        "\xea\xb0\x80",
        "\xe1\x86\xa8",
        "\xe3\x81\x8b",
        "\xe3\x82\x99",
        "\xe2\x84\xab",
        "\xcc\xa3",
        "\xe4\xb8\xad",
        "\xc3\xa9",
        "\xcd\x84",
    };
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n_frag; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        const char *fr = frags[s % (sizeof(frags) / sizeof(frags[0]))];
        fwrite(fr, 1, fr[0] ? strlen(fr) : 1, f);
    }
    fclose(f);
}

/* Decode parity: random id sequences (byte tokens that form broken UTF-8, added and special
 * tokens, ordinary pieces) decoded by the reference and by us, with and without skip_special. */
static void test_decode_parity(struct tokenizer *tok, const char *root)
{
    int32_t byte_ids[256];
    int n_byte = 0;
    for (size_t id = 0; id < tokenizer_vocab_size(tok) && n_byte < 256; id++) {
        size_t l;
        if (tokenizer_id_to_bytes(tok, (int32_t)id, &l) && l == 1 &&
            !tokenizer_is_added(tok, (int32_t)id))
            byte_ids[n_byte++] = (int32_t)id;
    }
    CHECK_EQ_INT(n_byte, 256);
    char tmpl[] = "/tmp/tern_tok_ids_XXXXXX";
    int fd = mkstemp(tmpl);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w");
    enum { LINES = 300, MAX_IDS = 40 };
    static int32_t seqs[LINES][MAX_IDS];
    static size_t lens[LINES];
    uint64_t s = 12345;
    for (int i = 0; i < LINES; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        lens[i] = 1 + s % MAX_IDS;
        for (size_t k = 0; k < lens[i]; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            int kind = (int)(s % 10);
            int32_t id;
            if (kind < 5)
                id = byte_ids[(s >> 8) % 256];
            else if (kind < 7)
                id = 151643 + (int32_t)((s >> 8) % 26);
            else
                id = (int32_t)((s >> 8) % 151643);
            seqs[i][k] = id;
            fprintf(f, k ? " %d" : "%d", id);
        }
        fputc('\n', f);
    }
    fclose(f);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "node '%s/tests/unit/tokenizer/ref_encode.mjs' --decode '%s'", root,
             tmpl);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    static char line[1 << 16];
    int bad = 0;
    for (int i = 0; p && i < LINES; i++) {
        for (int skip = 0; skip < 2; skip++) {
            if (!fgets(line, sizeof(line), p)) {
                bad++;
                continue;
            }
            line[strcspn(line, "\n")] = '\0';
            char *out = NULL;
            size_t ol = 0;
            CHECK_EQ_INT(tokenizer_decode(tok, seqs[i], lens[i],
                                          skip ? TOKENIZER_DECODE_SKIP_SPECIAL : 0, &out, &ol),
                         0);
            char hex[1 << 16];
            size_t h = 0;
            for (size_t k = 0; k < ol && h + 3 < sizeof(hex); k++)
                h += (size_t)snprintf(hex + h, sizeof(hex) - h, "%02x", (uint8_t)out[k]);
            hex[h] = '\0';
            if (strcmp(hex, line) != 0) {
                if (bad < 3)
                    fprintf(stderr, "decode mismatch line %d skip=%d:\n ours %s\n ref  %s\n", i,
                            skip, hex, line);
                bad++;
            }
            free(out);
        }
    }
    if (p)
        CHECK_EQ_INT(pclose(p), 0);
    unlink(tmpl);
    CHECK_EQ_INT(bad, 0);
    printf("decode parity: %d id sequences, %d mismatches\n", LINES, bad);
}

/* Encode every file with tok and with the reference (json: a tokenizer.json replacing the
 * packaged one, or NULL) and compare the ids. */
static void compare_encode(struct tokenizer *tok, const char *root, const char *json,
                           char *const *files, size_t n_files, const char *label)
{
    size_t cmd_len = 256 + strlen(root) + (json ? strlen(json) : 0);
    for (size_t i = 0; i < n_files; i++)
        cmd_len += strlen(files[i]) + 3;
    char *cmd = malloc(cmd_len);
    int w = sprintf(cmd, "node '%s/tests/unit/tokenizer/ref_encode.mjs'", root);
    if (json)
        w += sprintf(cmd + w, " --json '%s'", json);
    for (size_t i = 0; i < n_files; i++)
        w += sprintf(cmd + w, " '%s'", files[i]);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    size_t line_cap = 1 << 20;
    char *line = malloc(line_cap);
    for (size_t i = 0; p && i < n_files; i++) {
        if (!fgets(line, (int)line_cap, p)) {
            fprintf(stderr, "%s: reference gave no line for %s\n", label, files[i]);
            CHECK(0);
            break;
        }
        size_t len;
        char *text = tt_read_corpus(NULL, files[i], &len);
        CHECK(text != NULL);
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_EQ_INT(tokenizer_encode(tok, text, len, &ids, &n), 0);
        size_t k = 0, first_diff = SIZE_MAX;
        char *s = line;
        for (;;) {
            char *e;
            long v = strtol(s, &e, 10);
            if (e == s)
                break;
            if (first_diff == SIZE_MAX && (k >= n || ids[k] != v))
                first_diff = k;
            k++;
            s = e;
        }
        if (first_diff == SIZE_MAX && k != n)
            first_diff = k < n ? k : n;
        if (first_diff != SIZE_MAX) {
            fprintf(stderr,
                    "%s MISMATCH %s: ours %zu ids, reference %zu ids, first difference at %zu\n",
                    label, files[i], n, k, first_diff);
            CHECK(0);
        } else {
            printf("%s ok %s (%zu ids)\n", label, files[i], n);
        }
        free(ids);
        free(text);
    }
    if (p)
        CHECK_EQ_INT(pclose(p), 0);
    free(line);
    free(cmd);
}

/* The Qwen3.5/3.6 tokenizer's split regex adds \p{M} (per public reports: llama.cpp PR #19468,
 * onnxruntime-extensions PR #1063). Its tokenizer.json is not available here, so the Qwen3 file
 * with that regex stands in: our PCRE2 translation must still agree with the JS reference. */
static const char QWEN3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
    "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
    "\\\\s+(?!\\\\S)|\\\\s+";
static const char QWEN35_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?"
                                "[\\\\p{L}\\\\p{M}]+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{M}\\\\p{N}]+"
                                "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";

static void test_regex_variant(const char *tj, const char *root, char *const *files, size_t n_files)
{
    size_t len;
    char *json = tt_read_corpus(NULL, tj, &len);
    CHECK(json != NULL);
    char *at = json ? strstr(json, QWEN3_RE) : NULL;
    CHECK(at != NULL); /* the packaged file carries the Qwen3 regex */
    if (!at) {
        free(json);
        return;
    }
    size_t pre = (size_t)(at - json), old_l = strlen(QWEN3_RE), new_l = strlen(QWEN35_RE);
    char *v = malloc(len - old_l + new_l + 1);
    memcpy(v, json, pre);
    memcpy(v + pre, QWEN35_RE, new_l);
    memcpy(v + pre + new_l, at + old_l, len - pre - old_l + 1);
    size_t vlen = len - old_l + new_l;
    char tmpl[] = "/tmp/tern_tok_json_XXXXXX";
    int fd = mkstemp(tmpl);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(write(fd, v, vlen) == (ssize_t)vlen);
        close(fd);
        char err[256] = "";
        struct tokenizer *tok = tokenizer_create_from_json(v, vlen, err, sizeof(err));
        CHECK(tok != NULL);
        if (tok)
            compare_encode(tok, root, tmpl, files, n_files, "qwen35-regex");
        tokenizer_destroy(tok);
        unlink(tmpl);
    }
    free(v);
    free(json);
}

int main(void)
{
    char tj[1024], dir[1024];
    if (tt_paths(tj, sizeof(tj), dir, sizeof(dir)) < 0)
        TEST_SKIP("tokenizer.json not found (run scripts/setup.sh)");
    if (system("node --version > /dev/null 2>&1") != 0)
        TEST_SKIP("node not found");
    const char *root = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";
    char libdir[1200];
    snprintf(libdir, sizeof(libdir), "%s/.deps/node_modules/@lenml/tokenizers/package.json", root);
    if (access(libdir, R_OK) != 0)
        TEST_SKIP("@lenml/tokenizers not installed");

    char *files[MAX_FILES];
    size_t n_files = 0;
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d)
        return test_result();
    struct dirent *de;
    while ((de = readdir(d)) && n_files < MAX_FILES - 4) {
        size_t l = strlen(de->d_name);
        if (l > 4 &&
            (strcmp(de->d_name + l - 4, ".txt") == 0 || strcmp(de->d_name + l - 4, ".bin") == 0)) {
            files[n_files] = malloc(strlen(dir) + l + 2);
            sprintf(files[n_files], "%s/%s", dir, de->d_name);
            n_files++;
        }
    }
    closedir(d);
    qsort(files, n_files, sizeof(files[0]), cmp_str);
    CHECK(n_files >= 10);
    for (unsigned seed = 1; seed <= 3; seed++) {
        char tmpl[] = "/tmp/tern_tok_fuzz_XXXXXX";
        int fd = mkstemp(tmpl);
        CHECK(fd >= 0);
        if (fd < 0)
            break;
        close(fd);
        write_fuzz(tmpl, seed, 4000);
        files[n_files++] = strdup(tmpl);
    }

    char err[256] = "";
    struct tokenizer *tok = tokenizer_create_from_file(tj, err, sizeof(err));
    CHECK(tok != NULL);
    if (tok) {
        compare_encode(tok, root, NULL, files, n_files, "qwen3");
        test_decode_parity(tok, root);
    }
    tokenizer_destroy(tok);
    test_regex_variant(tj, root, files, n_files);
    for (size_t i = 0; i < n_files; i++) {
        if (strncmp(files[i], "/tmp/tern_tok_fuzz_", 19) == 0)
            unlink(files[i]);
        free(files[i]);
    }
    return test_result();
}
