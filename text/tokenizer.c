/* tokenizer: loading tokenizer.json (vocab, merges, added tokens, normalizer, pre-tokenizer),
 * lookups and decode. Encoding lives in tokenizer_encode.c. Vocabulary entries are kept both in
 * their byte-level form (as written in the file) and as raw bytes; BPE merges are resolved to id
 * pairs at load time so encoding never touches strings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/errbuf.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "text/tokenizer.h"
#include "tokenizer_internal.h"

// ---- string map ----

static size_t pow2_at_least(size_t n)
{
    size_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

int32_t tok_strmap_get(const struct tok_strmap *m, char *const *keys, const char *s, size_t len)
{
    size_t h = (size_t)tok_hash(s, len) & m->mask;
    for (;; h = (h + 1) & m->mask) {
        int32_t id = m->slots[h];
        if (id < 0)
            return -1;
        const char *k = keys[id];
        if (strncmp(k, s, len) == 0 && k[len] == '\0')
            return id;
    }
}

static void strmap_put(struct tok_strmap *m, const char *s, int32_t id)
{
    size_t h = (size_t)tok_hash(s, strlen(s)) & m->mask;
    while (m->slots[h] >= 0)
        h = (h + 1) & m->mask;
    m->slots[h] = id;
}

// ---- merges map ----

static struct tok_merge *merge_slot(const struct tokenizer *tok, uint64_t key)
{
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & tok->merges_mask;
    for (;; h = (h + 1) & tok->merges_mask) {
        struct tok_merge *m = &tok->merges[h];
        if (m->key == key || m->key == UINT64_MAX)
            return m;
    }
}

// ---- loading ----

/* Byte-level form -> raw bytes. Returns 0, or -1 if a code point is outside the byte map. */
static int piece_to_bytes(const char *piece, char **out, uint32_t *out_len)
{
    size_t len = strlen(piece), n = 0;
    char *b = xmalloc(len + 1);
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += tok_utf8_next(piece + i, len - i, &cp);
        int byte = tok_cp_to_byte(cp);
        if (byte < 0) {
            free(b);
            return -1;
        }
        b[n++] = (char)byte;
    }
    b[n] = '\0';
    *out = b;
    *out_len = (uint32_t)n;
    return 0;
}

static int load_vocab(struct tokenizer *tok, const cJSON *vocab, const cJSON *added, char *err,
                      size_t errlen)
{
    int32_t max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX - 1) {
            errbuf_set(err, errlen, "vocab entry %s: bad id", e->string);
            return ERR_FORMAT;
        }
        if ((int32_t)e->valuedouble > max_id)
            max_id = (int32_t)e->valuedouble;
    }
    cJSON_ArrayForEach(e, added)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > INT32_MAX - 1 ||
            !cJSON_IsString(content) || !content->valuestring[0]) {
            errbuf_set(err, errlen, "added_tokens: entry without id/content");
            return ERR_FORMAT;
        }
        if ((int32_t)id->valuedouble > max_id)
            max_id = (int32_t)id->valuedouble;
    }
    if (max_id < 0) {
        errbuf_set(err, errlen, "empty vocabulary");
        return ERR_FORMAT;
    }
    tok->n_ids = (size_t)max_id + 1;
    tok->piece = xcalloc(tok->n_ids, sizeof(*tok->piece));
    tok->bytes = xcalloc(tok->n_ids, sizeof(*tok->bytes));
    tok->bytes_len = xcalloc(tok->n_ids, sizeof(*tok->bytes_len));
    tok->flags = xcalloc(tok->n_ids, sizeof(*tok->flags));
    cJSON_ArrayForEach(e, vocab)
    {
        int32_t id = (int32_t)e->valuedouble;
        if (tok->piece[id]) {
            errbuf_set(err, errlen, "vocab: id %d used twice", id);
            return ERR_FORMAT;
        }
        tok->piece[id] = xstrdup(e->string);
        if (piece_to_bytes(e->string, &tok->bytes[id], &tok->bytes_len[id]) < 0) {
            errbuf_set(err, errlen, "vocab entry %s is not byte-level", e->string);
            return ERR_UNSUPPORTED;
        }
    }
    size_t n_added = (size_t)cJSON_GetArraySize(added);
    tok->added = xcalloc(n_added ? n_added : 1, sizeof(*tok->added));
    cJSON_ArrayForEach(e, added)
    {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        const char *content = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        struct tok_added *a = &tok->added[tok->n_added++];
        a->id = id;
        a->content = xstrdup(content);
        a->len = strlen(content);
        a->special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
        a->lstrip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "lstrip"));
        a->rstrip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "rstrip"));
        a->normalized = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "normalized"));
        free(tok->piece[id]);
        free(tok->bytes[id]);
        tok->piece[id] = xstrdup(content);
        tok->bytes[id] = xstrdup(content);
        tok->bytes_len[id] = (uint32_t)a->len;
        tok->flags[id] = TOK_FLAG_ADDED | (a->special ? TOK_FLAG_SPECIAL : 0);
        tok->added_first[(uint8_t)content[0]] = true;
    }
    tok->vocab.mask = pow2_at_least(tok->n_ids * 2) - 1;
    tok->vocab.slots = xmalloc((tok->vocab.mask + 1) * sizeof(int32_t));
    memset(tok->vocab.slots, 0xFF, (tok->vocab.mask + 1) * sizeof(int32_t));
    for (size_t id = 0; id < tok->n_ids; id++) {
        if (!tok->piece[id])
            continue;
        if (tok_strmap_get(&tok->vocab, tok->piece, tok->piece[id], strlen(tok->piece[id])) < 0)
            strmap_put(&tok->vocab, tok->piece[id], (int32_t)id);
    }
    for (int b = 0; b < 256; b++) {
        char piece[4];
        size_t n = tok_utf8_put(piece, tok_byte_to_cp((uint8_t)b));
        tok->byte_id[b] = tok_strmap_get(&tok->vocab, tok->piece, piece, n);
        if (tok->byte_id[b] < 0) {
            errbuf_set(err, errlen, "vocab lacks the byte token for 0x%02x", b);
            return ERR_FORMAT;
        }
    }
    return 0;
}

/* Merges are ["a", "b"] pairs (tokenizers >= 0.20) or "a b" strings. */
static int load_merges(struct tokenizer *tok, const cJSON *merges, char *err, size_t errlen)
{
    size_t n = (size_t)cJSON_GetArraySize(merges);
    tok->merges_mask = pow2_at_least(n * 2 + 2) - 1;
    tok->merges = xmalloc((tok->merges_mask + 1) * sizeof(*tok->merges));
    for (size_t i = 0; i <= tok->merges_mask; i++)
        tok->merges[i].key = UINT64_MAX;
    int32_t rank = 0;
    const cJSON *e;
    char buf[1024];
    cJSON_ArrayForEach(e, merges)
    {
        const char *a, *b;
        char *sp = NULL;
        if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
            cJSON_IsString(cJSON_GetArrayItem(e, 0)) && cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            a = cJSON_GetArrayItem(e, 0)->valuestring;
            b = cJSON_GetArrayItem(e, 1)->valuestring;
        } else if (cJSON_IsString(e) && (sp = strchr(e->valuestring, ' ')) &&
                   strlen(e->valuestring) < sizeof(buf)) {
            strcpy(buf, e->valuestring);
            buf[sp - e->valuestring] = '\0';
            a = buf;
            b = buf + (sp - e->valuestring) + 1;
        } else {
            errbuf_set(err, errlen, "merges[%d]: not a pair", rank);
            return ERR_FORMAT;
        }
        size_t la = strlen(a), lb = strlen(b);
        int32_t ia = tok_strmap_get(&tok->vocab, tok->piece, a, la);
        int32_t ib = tok_strmap_get(&tok->vocab, tok->piece, b, lb);
        char *ab = xmalloc(la + lb + 1);
        memcpy(ab, a, la);
        memcpy(ab + la, b, lb + 1);
        int32_t iab = tok_strmap_get(&tok->vocab, tok->piece, ab, la + lb);
        free(ab);
        if (ia < 0 || ib < 0 || iab < 0) {
            /* a merge whose parts are not in the vocabulary can never apply */
            rank++;
            continue;
        }
        struct tok_merge *m = merge_slot(tok, ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib);
        if (m->key == UINT64_MAX) {
            m->key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
            m->rank = rank;
            m->merged = iab;
        }
        rank++;
    }
    return 0;
}

/* Find the Split pre-tokenizer (directly or inside a Sequence) and compile its regex. */
static int load_pretok(struct tokenizer *tok, const cJSON *pt, char *err, size_t errlen)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pt, "type");
    if (!cJSON_IsString(type))
        return 0;
    if (strcmp(type->valuestring, "Sequence") == 0) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers"))
        {
            int rc = load_pretok(tok, e, err, errlen);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (strcmp(type->valuestring, "ByteLevel") == 0) {
        const cJSON *ur = cJSON_GetObjectItemCaseSensitive(pt, "use_regex");
        const cJSON *aps = cJSON_GetObjectItemCaseSensitive(pt, "add_prefix_space");
        if (cJSON_IsTrue(ur) || cJSON_IsTrue(aps)) {
            errbuf_set(err, errlen, "ByteLevel pre-tokenizer with use_regex/add_prefix_space");
            return ERR_UNSUPPORTED;
        }
        return 0;
    }
    if (strcmp(type->valuestring, "Split") != 0) {
        errbuf_set(err, errlen, "pre-tokenizer %s not supported", type->valuestring);
        return ERR_UNSUPPORTED;
    }
    const cJSON *re =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pt, "pattern"), "Regex");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(pt, "behavior");
    if (!cJSON_IsString(re) || tok->split_re ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pt, "invert")) || !cJSON_IsString(beh) ||
        strcmp(beh->valuestring, "Isolated") != 0) {
        errbuf_set(err, errlen, "only one Split{Regex, Isolated, invert=false} is supported");
        return ERR_UNSUPPORTED;
    }
    char *pat = tok_regex_translate(re->valuestring);
    if (!pat) {
        errbuf_set(err, errlen, "cannot translate split regex");
        return ERR_FORMAT;
    }
    int ec;
    PCRE2_SIZE off;
    tok->split_re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                  &ec, &off, NULL);
    if (!tok->split_re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof(msg));
        errbuf_set(err, errlen, "split regex: %s at %zu", (const char *)msg, (size_t)off);
        free(pat);
        return ERR_FORMAT;
    }
    free(pat);
    /* JIT is an optimisation: matching falls back to the interpreter when it is unavailable */
    (void)pcre2_jit_compile(tok->split_re, PCRE2_JIT_COMPLETE);
    return 0;
}

static int load_normalizer(struct tokenizer *tok, const cJSON *norm, char *err, size_t errlen)
{
    if (!norm || cJSON_IsNull(norm))
        return 0;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(norm, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "NFC") == 0) {
        tok->nfc = true;
        return 0;
    }
    errbuf_set(err, errlen, "normalizer %s not supported",
               cJSON_IsString(type) ? type->valuestring : "?");
    return ERR_UNSUPPORTED;
}

struct tokenizer *tokenizer_create_from_json(const char *json, size_t len, char *err, size_t errlen)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        errbuf_set(err, errlen, "not valid JSON");
        return NULL;
    }
    struct tokenizer *tok = xcalloc(1, sizeof(*tok));
    tok_cache_init(tok);
    int rc;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsString(mtype) || strcmp(mtype->valuestring, "BPE") != 0 ||
        !cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        errbuf_set(err, errlen, "model is not a BPE with vocab and merges");
        goto fail;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"))) {
        errbuf_set(err, errlen, "byte_fallback BPE not supported");
        goto fail;
    }
    rc = load_vocab(tok, vocab, added, err, errlen);
    if (rc < 0)
        goto fail;
    rc = load_merges(tok, merges, err, errlen);
    if (rc < 0)
        goto fail;
    rc = load_normalizer(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), err, errlen);
    if (rc < 0)
        goto fail;
    rc = load_pretok(tok, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), err, errlen);
    if (rc < 0)
        goto fail;
    tok->eos_id = tokenizer_token_to_id(tok, "<|im_end|>");
    tok->endoftext_id = tokenizer_token_to_id(tok, "<|endoftext|>");
    tok->im_start_id = tokenizer_token_to_id(tok, "<|im_start|>");
    cJSON_Delete(root);
    return tok;
fail:
    cJSON_Delete(root);
    tokenizer_destroy(tok);
    return NULL;
}

struct tokenizer *tokenizer_create_from_file(const char *path, char *err, size_t errlen)
{
    size_t n;
    char *buf = file_read(path, &n);
    if (!buf) {
        errbuf_set(err, errlen, "read %s: %s", path, strerror(errno));
        return NULL;
    }
    struct tokenizer *tok = NULL;
    if (n == 0)
        errbuf_set(err, errlen, "read %s failed: empty file", path);
    else
        tok = tokenizer_create_from_json(buf, n, err, errlen);
    free(buf);
    return tok;
}

void tokenizer_destroy(struct tokenizer *tok)
{
    if (!tok)
        return;
    tok_cache_deinit(tok);
    for (size_t i = 0; i < tok->n_ids; i++) {
        free(tok->piece[i]);
        free(tok->bytes[i]);
    }
    free(tok->piece);
    free(tok->bytes);
    free(tok->bytes_len);
    free(tok->flags);
    free(tok->vocab.slots);
    free(tok->merges);
    for (size_t i = 0; i < tok->n_added; i++)
        free(tok->added[i].content);
    free(tok->added);
    pcre2_code_free(tok->split_re);
    free(tok);
}

// ---- lookups ----

size_t tokenizer_vocab_size(const struct tokenizer *tok)
{
    return tok->n_ids;
}

int32_t tokenizer_token_to_id(const struct tokenizer *tok, const char *token)
{
    if (!tok->vocab.slots)
        return -1;
    return tok_strmap_get(&tok->vocab, tok->piece, token, strlen(token));
}

const char *tokenizer_id_to_token(const struct tokenizer *tok, int32_t id)
{
    if (id < 0 || (size_t)id >= tok->n_ids)
        return NULL;
    return tok->piece[id];
}

const char *tokenizer_id_to_bytes(const struct tokenizer *tok, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= tok->n_ids || !tok->bytes[id])
        return NULL;
    *len = tok->bytes_len[id];
    return tok->bytes[id];
}

bool tokenizer_is_added(const struct tokenizer *tok, int32_t id)
{
    return id >= 0 && (size_t)id < tok->n_ids && (tok->flags[id] & TOK_FLAG_ADDED);
}

bool tokenizer_is_special(const struct tokenizer *tok, int32_t id)
{
    return id >= 0 && (size_t)id < tok->n_ids && (tok->flags[id] & TOK_FLAG_SPECIAL);
}

int32_t tokenizer_eos_id(const struct tokenizer *tok)
{
    return tok->eos_id;
}

int32_t tokenizer_endoftext_id(const struct tokenizer *tok)
{
    return tok->endoftext_id;
}

int32_t tokenizer_im_start_id(const struct tokenizer *tok)
{
    return tok->im_start_id;
}

// ---- decode ----

int tokenizer_decode(const struct tokenizer *tok, const int32_t *ids, size_t n, int flags,
                     char **out, size_t *out_len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= tok->n_ids || !tok->bytes[ids[i]])
            return ERR_RANGE;
        total += tok->bytes_len[ids[i]];
    }
    char *raw = malloc(total + 1);
    char *txt = malloc(total * 3 + 1);
    if (!raw || !txt) {
        free(raw);
        free(txt);
        return ERR_NOMEM;
    }
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        if ((flags & TOKENIZER_DECODE_SKIP_SPECIAL) && (tok->flags[ids[i]] & TOK_FLAG_SPECIAL))
            continue;
        memcpy(raw + r, tok->bytes[ids[i]], tok->bytes_len[ids[i]]);
        r += tok->bytes_len[ids[i]];
    }
    size_t o = tokenizer_utf8_repair(raw, r, true, txt, NULL);
    txt[o] = '\0';
    free(raw);
    *out = txt;
    *out_len = o;
    return 0;
}
