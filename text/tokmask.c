/* tokmask: byte trie of a vocabulary and the per-state walk (see text/tokmask.h). The tries are
 * built with linked nodes, then frozen breadth-first so that a node's children are consecutive.
 * Inside a JSON string the bytes up to the closing quote depend only on the string's text state
 * (grammar_str_key, 14 of them): per text state the tokens read entirely inside the string are
 * one precomputed bit set (strset), and those that close it a small trie of the bytes after their
 * quote, walked from the state after the string. Below a quote of a trie that opens a string the
 * same split is kept per node (strsub). Elsewhere the walk feeds only the bytes that
 * grammar_next_bytes lets through. tokmask_compute_ref is the plain walk, the reference. */
#include "text/tokmask.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "text/tokenizer.h"

#define STR_KEYS_MAX 32 // text states with a precomputed set (14 are reachable)

struct tnode {
    uint32_t child;   // first child; 0: none (the root is node 0)
    uint32_t sibling; // next child of the same parent; 0: none
    int32_t ent;      // first entry of an id whose bytes end here; -1: none
    uint8_t b;        // the edge byte from the parent
};

struct tent {
    int32_t id;   // the token
    int32_t next; // next entry ending at the same node; -1: none
};

/* while inserting: linked nodes */
struct trie {
    struct tnode *nodes; // (n_nodes); node 0 is the root
    uint32_t n_nodes, cap_nodes;
    struct tent *ents; // (n_ents)
    uint32_t n_ents, cap_ents;
};

/* once built (trie_freeze): nodes in breadth-first order, so that a node's children are one run
 * of consecutive indices in increasing byte order; a walk scans them without chasing pointers */
struct fnode {
    uint32_t first; // first child; the children of node i are [first of i, first of i + 1)
    int32_t id;     // an id whose bytes end here; -1: none
    int32_t more;   // the other ids ending here: more[this...] up to a -1; -1: none
};

struct ftrie {
    uint32_t n_nodes;
    struct fnode *nodes; // (n_nodes + 1); the last one only bounds the children of the one before
    uint8_t *byte;       // (n_nodes) edge byte from the parent
    int32_t *more;       // ids after the first of a node, each list ended by -1
    struct strsub *subs; // (n_subs) below quotes, when the quote opens a string
    uint32_t *sub_nodes; // (n_subs) the node of each sub, increasing
    uint32_t n_subs;
};

/* below a trie node whose edge byte is a quote, for when that quote opens a string: the tokens
 * whose remaining bytes stay inside the string (a list), and the ones that close it (a trie of
 * their bytes after the closing quote); the rest is refused */
struct strsub {
    uint32_t node;   // the node of the trie that holds this
    int32_t *inside; // (n_inside) ids
    int n_inside;
    struct ftrie close; // the closing ones
};

/* the tokens offered to a string in one text state */
struct strset {
    uint32_t key;       // grammar_str_key
    uint32_t *inside;   // (TOKMASK_WORDS(n_vocab)) read whole with the string still open
    int n_inside;       // bits set in inside
    struct ftrie close; // tokens that close the string: their bytes after the closing quote
};

struct tokmask {
    int n_vocab;
    struct ftrie all;     // every token with bytes
    struct ftrie special; // the tokens that are not string-neutral (reference walk)
    uint32_t *neutral;    // (TOKMASK_WORDS(n_vocab)) the string-neutral tokens (reference walk)
    int n_neutral;
    struct strset str[STR_KEYS_MAX]; // (n_str) per string text state
    int n_str;
    char **bytes;                // (n_vocab) copies; NULL: never allowed
    size_t *lens;                // (n_vocab)
    size_t len_max;              // longest token, bytes
    struct grammar_state *stack; // (len_max + 2) walk scratch, one state per trie depth
};

// ---- tries ----

static uint32_t node_add(struct trie *t, uint8_t b)
{
    if (t->n_nodes == t->cap_nodes) {
        t->cap_nodes = t->cap_nodes ? 2 * t->cap_nodes : 1024;
        t->nodes = xrealloc(t->nodes, sizeof(*t->nodes) * t->cap_nodes);
    }
    struct tnode *n = &t->nodes[t->n_nodes];
    n->child = 0;
    n->sibling = 0;
    n->ent = -1;
    n->b = b;
    return t->n_nodes++;
}

static void trie_init(struct trie *t)
{
    memset(t, 0, sizeof(*t));
    node_add(t, 0);
}

static void trie_deinit(struct trie *t)
{
    free(t->nodes);
    free(t->ents);
    memset(t, 0, sizeof(*t));
}

/* ids of equal bytes are inserted in increasing order and chain in decreasing order */
static void insert(struct trie *t, const char *bytes, size_t len, int32_t id)
{
    uint32_t at = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)bytes[i];
        uint32_t c = t->nodes[at].child;
        while (c && t->nodes[c].b != b)
            c = t->nodes[c].sibling;
        if (!c) {
            c = node_add(t, b);
            t->nodes[c].sibling = t->nodes[at].child;
            t->nodes[at].child = c;
        }
        at = c;
    }
    if (t->n_ents == t->cap_ents) {
        t->cap_ents = t->cap_ents ? 2 * t->cap_ents : 256;
        t->ents = xrealloc(t->ents, sizeof(*t->ents) * t->cap_ents);
    }
    t->ents[t->n_ents] = (struct tent){.id = id, .next = t->nodes[at].ent};
    t->nodes[at].ent = (int32_t)t->n_ents++;
}

static int cmp_byte(const void *a, const void *b)
{
    const struct tnode *x = a, *y = b;
    return (int)x->b - (int)y->b;
}

/* the frozen copy of t, whose storage it takes (t is left empty) */
static void trie_freeze(struct trie *t, struct ftrie *f)
{
    uint32_t n = t->n_nodes;
    uint32_t *order = xmalloc(sizeof(uint32_t) * n); // breadth-first position -> node of t
    struct tnode *kids = xmalloc(sizeof(*kids) * 256);
    size_t n_more = 0;
    memset(f, 0, sizeof(*f));
    f->n_nodes = n;
    f->nodes = xmalloc(sizeof(*f->nodes) * (n + 1));
    f->byte = xmalloc(n);
    f->more = xmalloc(sizeof(int32_t) * (2 * (size_t)t->n_ents + 1)); // at most, shrunk below
    order[0] = 0;
    uint32_t tail = 1;
    for (uint32_t i = 0; i < n; i++) {
        const struct tnode *nd = &t->nodes[order[i]];
        struct fnode *fn = &f->nodes[i];
        f->byte[i] = nd->b;
        fn->first = tail;
        fn->id = nd->ent >= 0 ? t->ents[nd->ent].id : -1;
        fn->more = -1;
        if (nd->ent >= 0 && t->ents[nd->ent].next >= 0) {
            fn->more = (int32_t)n_more;
            for (int32_t e = t->ents[nd->ent].next; e >= 0; e = t->ents[e].next)
                f->more[n_more++] = t->ents[e].id;
            f->more[n_more++] = -1;
        }
        uint32_t k = 0;
        for (uint32_t c = nd->child; c; c = t->nodes[c].sibling) {
            kids[k] = t->nodes[c];
            kids[k].sibling = c; // remember the index across the sort
            k++;
        }
        qsort(kids, k, sizeof(*kids), cmp_byte);
        for (uint32_t j = 0; j < k; j++)
            order[tail + j] = kids[j].sibling;
        tail += k;
    }
    f->nodes[n] = (struct fnode){.first = tail, .id = -1, .more = -1};
    f->more = xrealloc(f->more, sizeof(int32_t) * (n_more + 1));
    free(kids);
    free(order);
    trie_deinit(t);
}

/* the k-th id ending at node x; -1 past the last */
static int32_t node_id(const struct ftrie *t, uint32_t x, int k)
{
    if (k == 0 || t->nodes[x].more < 0)
        return k == 0 ? t->nodes[x].id : -1;
    return t->more[t->nodes[x].more + k - 1];
}

static bool has_children(const struct ftrie *t, uint32_t x)
{
    return t->nodes[x].first < t->nodes[x + 1].first;
}

static void ftrie_deinit(struct ftrie *f)
{
    for (uint32_t i = 0; i < f->n_subs; i++) {
        free(f->subs[i].inside);
        ftrie_deinit(&f->subs[i].close);
    }
    free(f->subs);
    free(f->sub_nodes);
    free(f->nodes);
    free(f->byte);
    free(f->more);
    memset(f, 0, sizeof(*f));
}

/* set the ids ending at node `at`; returns how many */
static int mark(const struct ftrie *t, uint32_t at, uint32_t *mask)
{
    const struct fnode *x = &t->nodes[at];
    if (x->id < 0)
        return 0;
    mask[x->id >> 5] |= (uint32_t)1 << (x->id & 31);
    if (x->more < 0)
        return 1;
    int n = 1;
    for (const int32_t *id = &t->more[x->more]; *id >= 0; id++, n++)
        mask[*id >> 5] |= (uint32_t)1 << (*id & 31);
    return n;
}

// ---- below opening quotes ----

static void strsub_add_node(const struct tokmask *tm, const struct ftrie *t, uint32_t x, size_t dx,
                            struct strsub *sub, struct trie *close)
{
    int32_t id;
    for (int k = 0; (id = node_id(t, x, k)) >= 0; k++) {
        const char *rest = tm->bytes[id] + tm->lens[id] - dx; // the bytes after the quote
        size_t used;
        uint32_t key;
        switch (grammar_str_scan(GRAMMAR_STR_KEY_OPEN, rest, dx, &used, &key)) {
        case GRAMMAR_STR_OPEN:
            sub->inside = xrealloc(sub->inside, sizeof(int32_t) * (size_t)(sub->n_inside + 1));
            sub->inside[sub->n_inside++] = id;
            break;
        case GRAMMAR_STR_CLOSED:
            insert(close, rest + used, dx - used, id);
            break;
        case GRAMMAR_STR_REFUSED:
            break;
        }
    }
    for (uint32_t c = t->nodes[x].first; c < t->nodes[x + 1].first; c++)
        strsub_add_node(tm, t, c, dx + 1, sub, close);
}

static int cmp_sub(const void *a, const void *b)
{
    const struct strsub *x = a, *y = b;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* the subs of every quote node with children in t's subtree of node x; the bytes of every token
 * of t end with its path from the root */
static void strsubs_build_at(const struct tokmask *tm, struct ftrie *t, uint32_t x)
{
    for (uint32_t c = t->nodes[x].first; c < t->nodes[x + 1].first; c++) {
        if (t->byte[c] == '"' && has_children(t, c)) {
            struct strsub sub = {.node = c};
            struct trie close;
            trie_init(&close);
            for (uint32_t d = t->nodes[c].first; d < t->nodes[c + 1].first; d++)
                strsub_add_node(tm, t, d, 1, &sub, &close);
            trie_freeze(&close, &sub.close);
            t->subs = xrealloc(t->subs, sizeof(*t->subs) * (t->n_subs + 1));
            t->subs[t->n_subs++] = sub;
        }
        strsubs_build_at(tm, t, c);
    }
}

static void strsubs_build(const struct tokmask *tm, struct ftrie *t)
{
    strsubs_build_at(tm, t, 0);
    if (t->n_subs)
        qsort(t->subs, t->n_subs, sizeof(*t->subs), cmp_sub);
    t->sub_nodes = xmalloc(sizeof(uint32_t) * (t->n_subs + 1));
    for (uint32_t i = 0; i < t->n_subs; i++) {
        t->sub_nodes[i] = t->subs[i].node;
        strsubs_build(tm, &t->subs[i].close);
    }
}

static const struct strsub *strsub_find(const struct ftrie *t, uint32_t node)
{
    uint32_t lo = 0, hi = t->n_subs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->sub_nodes[mid] < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n_subs && t->sub_nodes[lo] == node ? &t->subs[lo] : NULL;
}

// ---- string text states ----

static struct strset *strset_find(struct tokmask *tm, uint32_t key)
{
    for (int i = 0; i < tm->n_str; i++)
        if (tm->str[i].key == key)
            return &tm->str[i];
    return NULL;
}

/* every text state a string reaches byte by byte from its opening quote, each with its sets */
static void strsets_build(struct tokmask *tm)
{
    const size_t words = TOKMASK_WORDS(tm->n_vocab);
    tm->str[0].key = GRAMMAR_STR_KEY_OPEN;
    tm->n_str = 1;
    for (int i = 0; i < tm->n_str; i++)
        for (int b = 0; b < 256; b++) {
            uint8_t c = (uint8_t)b;
            size_t used;
            uint32_t key;
            if (grammar_str_scan(tm->str[i].key, &c, 1, &used, &key) == GRAMMAR_STR_OPEN &&
                !strset_find(tm, key) && tm->n_str < STR_KEYS_MAX)
                tm->str[tm->n_str++].key = key;
        }
    for (int i = 0; i < tm->n_str; i++) {
        struct strset *ss = &tm->str[i];
        struct trie close;
        ss->inside = xcalloc(words, sizeof(uint32_t));
        trie_init(&close);
        for (int32_t id = 0; id < tm->n_vocab; id++) {
            if (!tm->bytes[id])
                continue;
            size_t used;
            uint32_t key;
            switch (grammar_str_scan(ss->key, tm->bytes[id], tm->lens[id], &used, &key)) {
            case GRAMMAR_STR_OPEN:
                ss->inside[id >> 5] |= (uint32_t)1 << (id & 31);
                ss->n_inside++;
                break;
            case GRAMMAR_STR_CLOSED:
                insert(&close, tm->bytes[id] + used, tm->lens[id] - used, id);
                break;
            case GRAMMAR_STR_REFUSED:
                break;
            }
        }
        trie_freeze(&close, &ss->close);
        strsubs_build(tm, &ss->close);
    }
}

// ---- lifecycle ----

struct sorted_tok {
    const char *bytes;
    size_t len;
    int32_t id;
};

static int cmp_tok(const void *a, const void *b)
{
    const struct sorted_tok *x = a, *y = b;
    int c = memcmp(x->bytes, y->bytes, x->len < y->len ? x->len : y->len);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

struct tokmask *tokmask_create(int n_vocab, const char *const *bytes, const size_t *lens)
{
    if (n_vocab <= 0)
        return NULL;
    struct tokmask *tm = xcalloc(1, sizeof(*tm));
    tm->n_vocab = n_vocab;
    tm->bytes = xcalloc((size_t)n_vocab, sizeof(char *));
    tm->lens = xcalloc((size_t)n_vocab, sizeof(size_t));
    tm->neutral = xcalloc(TOKMASK_WORDS(n_vocab), sizeof(uint32_t));
    struct sorted_tok *order = xmalloc(sizeof(*order) * (size_t)n_vocab);
    size_t n = 0;
    for (int32_t id = 0; id < n_vocab; id++) {
        if (!bytes[id] || !lens[id])
            continue;
        tm->bytes[id] = xmalloc(lens[id]);
        memcpy(tm->bytes[id], bytes[id], lens[id]);
        tm->lens[id] = lens[id];
        if (lens[id] > tm->len_max)
            tm->len_max = lens[id];
        order[n++] = (struct sorted_tok){tm->bytes[id], lens[id], id};
    }
    /* in byte order each insert finds its path at the head of every child list */
    qsort(order, n, sizeof(*order), cmp_tok);
    struct trie all, special;
    trie_init(&all);
    trie_init(&special);
    for (size_t i = 0; i < n; i++) {
        int32_t id = order[i].id;
        insert(&all, tm->bytes[id], tm->lens[id], id);
        if (grammar_is_string_neutral(tm->bytes[id], tm->lens[id])) {
            tm->neutral[id >> 5] |= (uint32_t)1 << (id & 31);
            tm->n_neutral++;
        } else {
            insert(&special, tm->bytes[id], tm->lens[id], id);
        }
    }
    free(order);
    trie_freeze(&all, &tm->all);
    trie_freeze(&special, &tm->special);
    strsets_build(tm);
    strsubs_build(tm, &tm->all);
    tm->stack = xmalloc(sizeof(*tm->stack) * (tm->len_max + 2));
    return tm;
}

void tokmask_grammar_vocab(const struct tokenizer *tok, int n_vocab, const char ***bytes_out,
                           size_t **lens_out)
{
    static const char *const tags[] = {"<tool_call>", "</tool_call>"};
    const char **bytes = xcalloc((size_t)(n_vocab > 0 ? n_vocab : 1), sizeof(char *));
    size_t *lens = xcalloc((size_t)(n_vocab > 0 ? n_vocab : 1), sizeof(size_t));
    size_t n_tok = tokenizer_vocab_size(tok);
    for (int32_t id = 0; id < n_vocab && (size_t)id < n_tok; id++) {
        size_t len = 0;
        const char *b = tokenizer_id_to_bytes(tok, id, &len);
        bool keep = b && !tokenizer_is_added(tok, id);
        for (size_t i = 0; i < sizeof tags / sizeof tags[0] && !keep && b; i++)
            keep = !tokenizer_is_special(tok, id) && len == strlen(tags[i]) &&
                   memcmp(b, tags[i], len) == 0;
        if (keep) {
            bytes[id] = b;
            lens[id] = len;
        }
    }
    *bytes_out = bytes;
    *lens_out = lens;
}

struct tokmask *tokmask_create_from_tokenizer(const struct tokenizer *tok, int n_vocab)
{
    if (n_vocab <= 0)
        return NULL;
    const char **bytes;
    size_t *lens;
    tokmask_grammar_vocab(tok, n_vocab, &bytes, &lens);
    struct tokmask *tm = tokmask_create(n_vocab, bytes, lens);
    free(bytes);
    free(lens);
    return tm;
}

void tokmask_destroy(struct tokmask *tm)
{
    if (!tm)
        return;
    for (int i = 0; i < tm->n_vocab; i++)
        free(tm->bytes[i]);
    for (int i = 0; i < tm->n_str; i++) {
        free(tm->str[i].inside);
        ftrie_deinit(&tm->str[i].close);
    }
    free(tm->bytes);
    free(tm->lens);
    ftrie_deinit(&tm->all);
    ftrie_deinit(&tm->special);
    free(tm->neutral);
    free(tm->stack);
    free(tm);
}

int tokmask_vocab(const struct tokmask *tm)
{
    return tm->n_vocab;
}

// ---- masks ----

static int walk(struct tokmask *tm, const struct ftrie *t, const struct grammar *g, uint32_t at,
                const struct grammar_state *cur, size_t depth, bool fast, uint32_t *mask);

/* st: just after the opening quote of a string at trie node sub->node; stack[depth] on is free */
static int strsub_walk(struct tokmask *tm, const struct strsub *sub, const struct grammar *g,
                       const struct grammar_state *st, size_t depth, uint32_t *mask)
{
    for (int i = 0; i < sub->n_inside; i++) {
        int32_t id = sub->inside[i];
        mask[id >> 5] |= (uint32_t)1 << (id & 31);
    }
    struct grammar_state *after = &tm->stack[depth];
    grammar_state_copy(after, st);
    grammar_str_close(after);
    int n = sub->n_inside + mark(&sub->close, 0, mask);
    return n + walk(tm, &sub->close, g, 0, after, depth, true, mask);
}

/* every child of trie node `at` whose byte state cur accepts; ids ending there join the mask.
 * Plain ASCII text inside a string leaves the state as it is, so those children reuse cur
 * instead of a copy and a feed. With fast: elsewhere bytes outside grammar_next_bytes are
 * skipped unfed, and below a quote that opens a string the node's strsub stands for the walk.
 * cur is tm->stack[depth] or outside the stack; stack[depth + 1] on is free. */
static int walk(struct tokmask *tm, const struct ftrie *t, const struct grammar *g, uint32_t at,
                const struct grammar_state *cur, size_t depth, bool fast, uint32_t *mask)
{
    int n = 0;
    const bool str = grammar_in_string(cur, g);
    uint64_t ok[4] = {~(uint64_t)0, ~(uint64_t)0, ~(uint64_t)0, ~(uint64_t)0};
    if (fast && !str)
        grammar_next_bytes(cur, g, ok);
    struct grammar_state *next = &tm->stack[depth + 1];
    for (uint32_t c = t->nodes[at].first, end = t->nodes[at + 1].first; c < end; c++) {
        const uint8_t b = t->byte[c];
        const struct grammar_state *st = cur;
        if (!str || b < 0x20 || b >= 0x7f || b == '"' || b == '\\') {
            if (!(ok[b >> 6] >> (b & 63) & 1))
                continue;
            grammar_state_copy(next, cur);
            if (!grammar_feed(next, g, b))
                continue;
            st = next;
        }
        n += mark(t, c, mask);
        if (!has_children(t, c))
            continue;
        const struct strsub *sub = NULL;
        if (fast && b == '"' && grammar_str_key(st, g) == GRAMMAR_STR_KEY_OPEN)
            sub = strsub_find(t, c);
        if (sub)
            n += strsub_walk(tm, sub, g, st, depth + 2, mask);
        else
            n += walk(tm, t, g, c, st, depth + 1, fast, mask);
    }
    return n;
}

int tokmask_compute_ref(struct tokmask *tm, const struct grammar *g, const struct grammar_state *s,
                        uint32_t *mask)
{
    const size_t words = TOKMASK_WORDS(tm->n_vocab);
    if (grammar_in_string(s, g)) {
        memcpy(mask, tm->neutral, sizeof(uint32_t) * words);
        return tm->n_neutral + walk(tm, &tm->special, g, 0, s, 1, false, mask);
    }
    memset(mask, 0, sizeof(uint32_t) * words);
    return walk(tm, &tm->all, g, 0, s, 1, false, mask);
}

int tokmask_compute(struct tokmask *tm, const struct grammar *g, const struct grammar_state *s,
                    uint32_t *mask)
{
    uint32_t key = grammar_str_key(s, g);
    const struct strset *ss = key ? strset_find(tm, key) : NULL;
    if (!ss) {
        memset(mask, 0, sizeof(uint32_t) * TOKMASK_WORDS(tm->n_vocab));
        return walk(tm, &tm->all, g, 0, s, 1, true, mask);
    }
    memcpy(mask, ss->inside, sizeof(uint32_t) * TOKMASK_WORDS(tm->n_vocab));
    struct grammar_state *after = &tm->stack[0];
    grammar_state_copy(after, s);
    grammar_str_close(after);
    int n = ss->n_inside + mark(&ss->close, 0, mask);
    return n + walk(tm, &ss->close, g, 0, after, 0, true, mask);
}

bool tokmask_advance(const struct tokmask *tm, const struct grammar *g, struct grammar_state *s,
                     int32_t id)
{
    if (id < 0 || id >= tm->n_vocab || !tm->bytes[id])
        return false;
    return grammar_feed_bytes(s, g, tm->bytes[id], tm->lens[id]);
}
