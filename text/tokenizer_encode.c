/* tokenizer_encode: text -> ids. UTF-8 repair, added-token split (longest match), NFC, regex
 * split, byte-level BPE by merge rank (lowest rank first, leftmost on ties, as the JS reference's
 * rank + position bias), and a bounded BPE cache sharded behind mutexes so that concurrent
 * encodes on one tokenizer are safe. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "text/tokenizer.h"
#include "tokenizer_internal.h"

uint64_t tok_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

// ---- output vector ----

struct ids_vec {
    int32_t *p;
    size_t n, cap;
    int rc; /* sticky ERR_NOMEM */
};

static void vec_push(struct ids_vec *v, const int32_t *ids, size_t n)
{
    if (v->rc < 0)
        return;
    if (v->n + n > v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        while (cap < v->n + n)
            cap *= 2;
        int32_t *p = realloc(v->p, cap * sizeof(*p));
        if (!p) {
            v->rc = ERR_NOMEM;
            return;
        }
        v->p = p;
        v->cap = cap;
    }
    memcpy(v->p + v->n, ids, n * sizeof(*ids));
    v->n += n;
}

// ---- cache ----

void tok_cache_init(struct tokenizer *tok)
{
    for (int i = 0; i < TOKENIZER_CACHE_SHARDS; i++) {
        pthread_mutex_init(&tok->cache[i].lock, NULL);
        tok->cache[i].slots = xcalloc(TOKENIZER_CACHE_SLOTS, sizeof(struct tok_cache_entry));
        tok->cache[i].used = 0;
    }
}

static void shard_clear(struct tok_cache_shard *s)
{
    for (size_t i = 0; i < TOKENIZER_CACHE_SLOTS; i++) {
        free(s->slots[i].key);
        free(s->slots[i].ids);
    }
    memset(s->slots, 0, TOKENIZER_CACHE_SLOTS * sizeof(*s->slots));
    s->used = 0;
}

void tok_cache_deinit(struct tokenizer *tok)
{
    for (int i = 0; i < TOKENIZER_CACHE_SHARDS; i++) {
        if (!tok->cache[i].slots)
            continue;
        shard_clear(&tok->cache[i]);
        free(tok->cache[i].slots);
        tok->cache[i].slots = NULL;
        pthread_mutex_destroy(&tok->cache[i].lock);
    }
}

/* Appends the cached ids for key to v; false on a miss. */
static bool cache_get(struct tokenizer *tok, uint64_t h, const char *key, size_t len,
                      struct ids_vec *v)
{
    struct tok_cache_shard *s = &tok->cache[h % TOKENIZER_CACHE_SHARDS];
    bool hit = false;
    pthread_mutex_lock(&s->lock);
    for (size_t i = (h >> 8) & (TOKENIZER_CACHE_SLOTS - 1);;
         i = (i + 1) & (TOKENIZER_CACHE_SLOTS - 1)) {
        struct tok_cache_entry *e = &s->slots[i];
        if (!e->key)
            break;
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0) {
            vec_push(v, e->ids, e->n_ids);
            hit = true;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return hit;
}

static void cache_put(struct tokenizer *tok, uint64_t h, const char *key, size_t len,
                      const int32_t *ids, size_t n)
{
    struct tok_cache_shard *s = &tok->cache[h % TOKENIZER_CACHE_SHARDS];
    pthread_mutex_lock(&s->lock);
    if (s->used >= TOKENIZER_CACHE_SLOTS / 4 * 3)
        shard_clear(s);
    for (size_t i = (h >> 8) & (TOKENIZER_CACHE_SLOTS - 1);;
         i = (i + 1) & (TOKENIZER_CACHE_SLOTS - 1)) {
        struct tok_cache_entry *e = &s->slots[i];
        if (!e->key) {
            e->hash = h;
            e->key = xmalloc(len ? len : 1);
            memcpy(e->key, key, len);
            e->key_len = (uint32_t)len;
            e->ids = xmalloc(n * sizeof(*ids));
            memcpy(e->ids, ids, n * sizeof(*ids));
            e->n_ids = (uint32_t)n;
            s->used++;
            break;
        }
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0)
            break; /* another thread stored it first */
    }
    pthread_mutex_unlock(&s->lock);
}

// ---- BPE ----

struct bpe_pair {
    int32_t rank;
    int32_t pos;         /* index of the left symbol (its first byte) */
    int32_t left, right; /* ids at the time of pushing; stale when they changed */
    int32_t merged;
};

struct bpe_work {
    size_t cap; /* symbols */
    int32_t *id, *next, *prev;
    struct bpe_pair *heap;
    size_t heap_n, heap_cap;
};

/* Symbol arrays for an n-byte piece. Sized by the input, so failure is ERR_NOMEM, not abort. */
static int work_reserve(struct bpe_work *w, size_t n)
{
    if (n <= w->cap)
        return 0;
    size_t cap = n * 2;
    int32_t *id = realloc(w->id, cap * sizeof(int32_t));
    if (id)
        w->id = id;
    int32_t *next = id ? realloc(w->next, cap * sizeof(int32_t)) : NULL;
    if (next)
        w->next = next;
    int32_t *prev = next ? realloc(w->prev, cap * sizeof(int32_t)) : NULL;
    if (!prev)
        return ERR_NOMEM; /* arrays that did grow stay valid; cap is unchanged */
    w->prev = prev;
    w->cap = cap;
    return 0;
}

static void work_free(struct bpe_work *w)
{
    free(w->id);
    free(w->next);
    free(w->prev);
    free(w->heap);
}

static bool pair_less(const struct bpe_pair *a, const struct bpe_pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(struct bpe_work *w, struct bpe_pair p)
{
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap ? w->heap_cap * 2 : 64;
        struct bpe_pair *h = realloc(w->heap, cap * sizeof(*w->heap));
        if (!h)
            return ERR_NOMEM;
        w->heap = h;
        w->heap_cap = cap;
    }
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_less(&p, &w->heap[parent]))
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = p;
    return 0;
}

static struct bpe_pair heap_pop(struct bpe_work *w)
{
    struct bpe_pair top = w->heap[0];
    struct bpe_pair last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && pair_less(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!pair_less(&w->heap[c], &last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n)
        w->heap[i] = last;
    return top;
}

static int try_pair(const struct tokenizer *tok, struct bpe_work *w, int32_t pos)
{
    int32_t r = w->next[pos];
    if (r < 0)
        return 0;
    uint64_t key = ((uint64_t)(uint32_t)w->id[pos] << 32) | (uint32_t)w->id[r];
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & tok->merges_mask;
    for (;; h = (h + 1) & tok->merges_mask) {
        const struct tok_merge *m = &tok->merges[h];
        if (m->key == UINT64_MAX)
            return 0;
        if (m->key == key)
            return heap_push(w, (struct bpe_pair){m->rank, pos, w->id[pos], w->id[r], m->merged});
    }
}

/* BPE over the raw bytes of one pre-token; appends ids to v. */
static void bpe_piece(struct tokenizer *tok, struct bpe_work *w, const char *s, size_t n,
                      struct ids_vec *v)
{
    if (n == 1) {
        vec_push(v, &tok->byte_id[(uint8_t)s[0]], 1);
        return;
    }
    uint64_t h = 0;
    bool cacheable = n <= TOKENIZER_CACHE_MAX_KEY;
    if (cacheable) {
        h = tok_hash(s, n);
        if (cache_get(tok, h, s, n, v))
            return;
    }
    int rc = work_reserve(w, n);
    if (rc < 0) {
        v->rc = rc;
        return;
    }
    w->heap_n = 0;
    for (size_t i = 0; i < n; i++) {
        w->id[i] = tok->byte_id[(uint8_t)s[i]];
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n && rc == 0; i++)
        rc = try_pair(tok, w, (int32_t)i);
    while (w->heap_n && rc == 0) {
        struct bpe_pair p = heap_pop(w);
        int32_t r = w->next[p.pos];
        /* dead symbols have id -1; a stale pair sees different ids */
        if (w->id[p.pos] != p.left || r < 0 || w->id[r] != p.right)
            continue;
        w->id[p.pos] = p.merged;
        w->next[p.pos] = w->next[r];
        if (w->next[r] >= 0)
            w->prev[w->next[r]] = p.pos;
        w->id[r] = -1;
        w->next[r] = -1;
        if (w->prev[p.pos] >= 0)
            rc = try_pair(tok, w, w->prev[p.pos]);
        if (rc == 0)
            rc = try_pair(tok, w, p.pos);
    }
    if (rc < 0) {
        v->rc = rc;
        return;
    }
    size_t start = v->n;
    for (int32_t i = 0; i >= 0; i = w->next[i])
        vec_push(v, &w->id[i], 1);
    if (cacheable && v->rc == 0)
        cache_put(tok, h, s, n, v->p + start, v->n - start);
}

// ---- sections ----

/* Split one normalized text section into pre-tokens and BPE each. */
static int encode_section(struct tokenizer *tok, struct bpe_work *w, pcre2_match_data *md,
                          const char *s, size_t n, struct ids_vec *v)
{
    if (!tok->split_re) {
        bpe_piece(tok, w, s, n, v);
        return v->rc;
    }
    size_t prev = 0, at = 0;
    while (at <= n) {
        int rc = pcre2_match(tok->split_re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return ERR_INVAL; /* matching limit: cannot happen for the patterns we accept */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms > prev)
            bpe_piece(tok, w, s + prev, ms - prev, v);
        if (me > ms)
            bpe_piece(tok, w, s + ms, me - ms, v);
        prev = me;
        if (me == ms) {
            if (me >= n)
                break;
            uint32_t cp;
            at = me + tok_utf8_next(s + me, n - me, &cp);
        } else {
            at = me;
        }
    }
    if (prev < n)
        bpe_piece(tok, w, s + prev, n - prev, v);
    return v->rc;
}

/* Code points that NFC leaves alone and that never combine with what precedes them (starters
 * that are no second element of a composition): everything below U+0300, CJK unified ideographs
 * and precomposed Hangul syllables. NFC(a + b) == NFC(a) + NFC(b) when b starts with one. */
static bool nfc_inert(uint32_t cp)
{
    return cp < 0x300 || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3);
}

struct nfc_out {
    char *p;
    size_t n, cap;
};

static int nfc_put(struct nfc_out *o, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (o->n + n > o->cap) {
        size_t cap = (o->n + n) * 2;
        char *p = realloc(o->p, cap);
        if (!p)
            return ERR_NOMEM;
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    return 0;
}

/* NFC of s[0..n) into *out (malloc'd; NULL when s is already NFC-inert throughout). Only the
 * stretches around non-inert code points go through utf8proc. */
static int nfc_section(const char *s, size_t n, char **out, size_t *out_len)
{
    struct nfc_out o = {0};
    size_t done = 0, prev = 0, i = 0; /* done: bytes of s emitted; prev: start of previous cp */
    int rc = 0;
    *out = NULL;
    while (i < n && rc == 0) {
        uint32_t cp;
        size_t l = tok_utf8_next(s + i, n - i, &cp);
        if (nfc_inert(cp)) {
            prev = i;
            i += l;
            continue;
        }
        /* a region from the previous (inert) code point to the next inert one */
        size_t start = prev < i && prev >= done ? prev : i;
        size_t end = i + l;
        while (end < n) {
            size_t l2 = tok_utf8_next(s + end, n - end, &cp);
            if (nfc_inert(cp))
                break;
            end += l2;
        }
        utf8proc_uint8_t *norm = NULL;
        utf8proc_ssize_t nn =
            utf8proc_map((const utf8proc_uint8_t *)s + start, (utf8proc_ssize_t)(end - start),
                         &norm, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (nn < 0) {
            rc = nn == UTF8PROC_ERROR_NOMEM ? ERR_NOMEM : ERR_INVAL;
            break;
        }
        rc = nfc_put(&o, s + done, start - done);
        if (rc == 0)
            rc = nfc_put(&o, (const char *)norm, (size_t)nn);
        free(norm);
        done = prev = i = end;
    }
    if (rc == 0 && o.p)
        rc = nfc_put(&o, s + done, n - done);
    if (rc < 0) {
        free(o.p);
        return rc;
    }
    *out = o.p;
    *out_len = o.n;
    return 0;
}

static int encode_text_section(struct tokenizer *tok, struct bpe_work *w, pcre2_match_data *md,
                               const char *s, size_t n, struct ids_vec *v)
{
    if (n == 0)
        return 0;
    char *norm = NULL;
    size_t nn = 0;
    if (tok->nfc) {
        int rc = nfc_section(s, n, &norm, &nn);
        if (rc < 0)
            return rc;
    }
    int rc = norm ? encode_section(tok, w, md, norm, nn, v) : encode_section(tok, w, md, s, n, v);
    free(norm);
    return rc;
}

/* Longest added token starting at s[0..n); index into tok->added or -1. */
static int match_added(const struct tokenizer *tok, const char *s, size_t n, bool skip_special)
{
    int best = -1;
    size_t best_len = 0;
    for (size_t i = 0; i < tok->n_added; i++) {
        const struct tok_added *a = &tok->added[i];
        if (skip_special && a->special)
            continue;
        if (a->len > best_len && a->len <= n && a->content[0] == s[0] &&
            memcmp(a->content, s, a->len) == 0) {
            best = (int)i;
            best_len = a->len;
        }
    }
    return best;
}

static size_t trim_end(const char *s, size_t n)
{
    while (n > 0) {
        size_t k = n - 1;
        while (k > 0 && ((uint8_t)s[k] & 0xC0) == 0x80)
            k--;
        uint32_t cp;
        tok_utf8_next(s + k, n - k, &cp);
        if (!tok_is_js_space(cp))
            break;
        n = k;
    }
    return n;
}

static size_t trim_start(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = tok_utf8_next(s + i, n - i, &cp);
        if (!tok_is_js_space(cp))
            break;
        i += l;
    }
    return i;
}

int tokenizer_encode(struct tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n)
{
    return tokenizer_encode_flags(tok, text, len, 0, ids, n);
}

int tokenizer_encode_flags(struct tokenizer *tok, const char *text, size_t len, int flags,
                           int32_t **ids, size_t *n)
{
    bool split_special = (flags & TOKENIZER_ENCODE_SPLIT_SPECIAL) != 0;
    *ids = NULL;
    *n = 0;
    /* valid UTF-8 (the common case) is used in place; otherwise a repaired copy */
    char *copy = NULL;
    const char *fixed = text;
    size_t flen = len;
    if (!tok_utf8_valid(text, len)) {
        flen = tokenizer_utf8_repair(text, len, true, NULL, NULL);
        copy = malloc(flen + 1);
        if (!copy)
            return ERR_NOMEM;
        flen = tokenizer_utf8_repair(text, len, true, copy, NULL);
        fixed = copy;
    }
    pcre2_match_data *md =
        tok->split_re ? pcre2_match_data_create_from_pattern(tok->split_re, NULL) : NULL;
    if (tok->split_re && !md) {
        free(copy);
        return ERR_NOMEM;
    }
    struct bpe_work w = {0};
    struct ids_vec v = {0};
    int rc = 0;
    size_t start = 0; /* start of the pending text section */
    bool strip_next = false;
    for (size_t i = 0; i < flen && rc == 0;) {
        int a = tok->added_first[(uint8_t)fixed[i]]
                    ? match_added(tok, fixed + i, flen - i, split_special)
                    : -1;
        if (a < 0) {
            i++;
            continue;
        }
        const struct tok_added *ad = &tok->added[a];
        size_t sec_start = start, sec_end = i;
        if (strip_next)
            sec_start += trim_start(fixed + sec_start, sec_end - sec_start);
        if (ad->lstrip)
            sec_end = sec_start + trim_end(fixed + sec_start, sec_end - sec_start);
        rc = encode_text_section(tok, &w, md, fixed + sec_start, sec_end - sec_start, &v);
        vec_push(&v, &ad->id, 1);
        strip_next = ad->rstrip;
        i += ad->len;
        start = i;
    }
    if (rc == 0) {
        size_t sec_start = start;
        if (strip_next)
            sec_start += trim_start(fixed + sec_start, flen - sec_start);
        rc = encode_text_section(tok, &w, md, fixed + sec_start, flen - sec_start, &v);
    }
    if (rc == 0)
        rc = v.rc;
    work_free(&w);
    pcre2_match_data_free(md);
    free(copy);
    if (rc < 0) {
        free(v.p);
        return rc;
    }
    *ids = v.p;
    *n = v.n;
    return 0;
}
