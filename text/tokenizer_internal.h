/* Shared between tokenizer.c (loading, lookups, decode), tokenizer_encode.c (added-token split,
 * NFC, regex split, BPE + cache) and tokenizer_utf8.c (byte-level map, UTF-8 repair). */
#ifndef TEXT_TOKENIZER_INTERNAL_H
#define TEXT_TOKENIZER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define TOKENIZER_CACHE_SHARDS 16
#define TOKENIZER_CACHE_SLOTS 4096  /* per shard, power of two; shard cleared when 3/4 full */
#define TOKENIZER_CACHE_MAX_KEY 256 /* longer pre-tokens are not cached (bytes) */

/* string -> int32 open-addressing map over strings stored elsewhere (keys not owned). */
struct tok_strmap {
    int32_t *slots; /* id per slot, -1 empty */
    size_t mask;    /* slot count - 1 */
};

struct tok_merge {
    uint64_t key;   /* (left << 32) | right, UINT64_MAX empty */
    int32_t rank;   /* position in the merges list, lower merges first */
    int32_t merged; /* id of left+right */
};

struct tok_added {
    int32_t id;
    char *content; /* UTF-8, owned */
    size_t len;
    bool special;
    bool lstrip;
    bool rstrip;
    bool normalized; /* parsed for completeness; the JS reference matches on raw text always */
};

struct tok_cache_entry {
    uint64_t hash;
    char *key; /* owned, NULL = empty */
    uint32_t key_len;
    uint32_t n_ids;
    int32_t *ids; /* owned */
};

struct tok_cache_shard {
    pthread_mutex_t lock;
    struct tok_cache_entry *slots; /* TOKENIZER_CACHE_SLOTS */
    size_t used;
};

struct tokenizer {
    size_t n_ids;             /* max id + 1 */
    char **piece;             /* id -> vocabulary form (NUL-terminated, owned) or NULL */
    char **bytes;             /* id -> raw bytes (owned) or NULL */
    uint32_t *bytes_len;      /* id -> length of bytes[id] */
    uint8_t *flags;           /* id -> TOK_FLAG_* */
    struct tok_strmap vocab;  /* piece -> id */
    int32_t byte_id[256];     /* id of the token that is exactly one raw byte */
    struct tok_merge *merges; /* open addressing, merges_mask + 1 slots */
    size_t merges_mask;
    struct tok_added *added; /* in file order */
    size_t n_added;
    bool added_first[256]; /* some added token starts with this byte */
    pcre2_code *split_re;  /* NULL: no Split pre-tokenizer (whole section is one piece) */
    bool nfc;              /* normalizer is NFC */
    int32_t eos_id, endoftext_id, im_start_id;
    struct tok_cache_shard cache[TOKENIZER_CACHE_SHARDS];
};

enum { TOK_FLAG_ADDED = 1, TOK_FLAG_SPECIAL = 2 };

/* ---- tokenizer_utf8.c ---- */
/* GPT-2 byte -> code point map and its inverse (code point < 324 -> byte, -1 otherwise). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);
/* Decode one UTF-8 code point from valid UTF-8; returns its length. */
size_t tok_utf8_next(const char *s, size_t len, uint32_t *cp);
/* Write cp as UTF-8; returns the length (1..4). */
size_t tok_utf8_put(char *out, uint32_t cp);
/* True when s[0..n) is valid UTF-8 (what tokenizer_utf8_repair would leave unchanged). */
bool tok_utf8_valid(const char *s, size_t n);
/* JavaScript String.prototype.trim whitespace (WhiteSpace + LineTerminator). */
bool tok_is_js_space(uint32_t cp);
/* Translate a tokenizer.json regex to PCRE2 with JavaScript semantics; malloc'd string or NULL. */
char *tok_regex_translate(const char *pattern);

/* ---- tokenizer_encode.c ---- */
uint64_t tok_hash(const char *s, size_t len);
void tok_cache_init(struct tokenizer *tok);
void tok_cache_deinit(struct tokenizer *tok);
int32_t tok_strmap_get(const struct tok_strmap *m, char *const *keys, const char *s, size_t len);

#endif
