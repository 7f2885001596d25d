/* tokmask: byte trie of a vocabulary and the per-state walk (see text/tokmask.h). Trie nodes are
 * first-child / next-sibling links in one array; ids with equal bytes chain through tok_next.
 * Inside a JSON string most tokens are plain text that the grammar accepts without changing its
 * state (grammar_in_string): those are one precomputed bit set, and only the other tokens (quotes,
 * escapes, partial UTF-8, control bytes) are in a second, much smaller trie walked there. */
#include "text/tokmask.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "text/tokenizer.h"

struct tnode {
    uint32_t child;   // first child; 0: none (the root is node 0)
    uint32_t sibling; // next child of the same parent; 0: none
    int32_t tok;      // first id whose bytes end here; -1: none
    uint8_t b;        // the edge byte from the parent
};

struct trie {
    struct tnode *nodes; // (n_nodes); node 0 is the root
    uint32_t n_nodes, cap_nodes;
};

struct tokmask {
    int n_vocab;
    struct trie all;     // every token with bytes
    struct trie special; // the tokens that are not string-neutral
    uint32_t *neutral;   // (TOKMASK_WORDS(n_vocab)) the string-neutral tokens
    int n_neutral;
    int32_t *tok_next;           // (n_vocab) next id with the same bytes in its trie; -1: none
    char **bytes;                // (n_vocab) copies; NULL: never allowed
    size_t *lens;                // (n_vocab)
    size_t len_max;              // longest token, bytes
    struct grammar_state *stack; // (len_max + 1) walk scratch, one state per trie depth
};

static uint32_t node_add(struct trie *t, uint8_t b)
{
    if (t->n_nodes == t->cap_nodes) {
        t->cap_nodes = t->cap_nodes ? 2 * t->cap_nodes : 1024;
        t->nodes = xrealloc(t->nodes, sizeof(*t->nodes) * t->cap_nodes);
    }
    struct tnode *n = &t->nodes[t->n_nodes];
    n->child = 0;
    n->sibling = 0;
    n->tok = -1;
    n->b = b;
    return t->n_nodes++;
}

static void insert(struct tokmask *tm, struct trie *t, int32_t id)
{
    uint32_t at = 0;
    for (size_t i = 0; i < tm->lens[id]; i++) {
        uint8_t b = (uint8_t)tm->bytes[id][i];
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
    tm->tok_next[id] = t->nodes[at].tok;
    t->nodes[at].tok = id;
}

struct tokmask *tokmask_create(int n_vocab, const char *const *bytes, const size_t *lens)
{
    if (n_vocab <= 0)
        return NULL;
    struct tokmask *tm = xcalloc(1, sizeof(*tm));
    tm->n_vocab = n_vocab;
    tm->tok_next = xmalloc(sizeof(int32_t) * (size_t)n_vocab);
    tm->bytes = xcalloc((size_t)n_vocab, sizeof(char *));
    tm->lens = xcalloc((size_t)n_vocab, sizeof(size_t));
    tm->neutral = xcalloc(TOKMASK_WORDS(n_vocab), sizeof(uint32_t));
    node_add(&tm->all, 0);
    node_add(&tm->special, 0);
    for (int32_t id = 0; id < n_vocab; id++) {
        tm->tok_next[id] = -1;
        if (!bytes[id] || !lens[id])
            continue;
        tm->bytes[id] = xmalloc(lens[id]);
        memcpy(tm->bytes[id], bytes[id], lens[id]);
        tm->lens[id] = lens[id];
        if (lens[id] > tm->len_max)
            tm->len_max = lens[id];
        insert(tm, &tm->all, id);
    }
    /* the special trie shares tok_next: ids of equal bytes are neutral or not together and are
     * inserted in the same order, so their chain is the same in both tries */
    for (int32_t id = 0; id < n_vocab; id++) {
        if (!tm->bytes[id])
            continue;
        if (grammar_is_string_neutral(tm->bytes[id], tm->lens[id])) {
            tm->neutral[id >> 5] |= (uint32_t)1 << (id & 31);
            tm->n_neutral++;
        } else {
            insert(tm, &tm->special, id);
        }
    }
    tm->stack = xmalloc(sizeof(*tm->stack) * (tm->len_max + 1));
    return tm;
}

struct tokmask *tokmask_create_from_tokenizer(const struct tokenizer *tok, int n_vocab)
{
    if (n_vocab <= 0)
        return NULL;
    const char **bytes = xcalloc((size_t)n_vocab, sizeof(char *));
    size_t *lens = xcalloc((size_t)n_vocab, sizeof(size_t));
    size_t n_tok = tokenizer_vocab_size(tok);
    for (int32_t id = 0; id < n_vocab && (size_t)id < n_tok; id++)
        if (!tokenizer_is_added(tok, id))
            bytes[id] = tokenizer_id_to_bytes(tok, id, &lens[id]);
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
    free(tm->bytes);
    free(tm->lens);
    free(tm->tok_next);
    free(tm->all.nodes);
    free(tm->special.nodes);
    free(tm->neutral);
    free(tm->stack);
    free(tm);
}

int tokmask_vocab(const struct tokmask *tm)
{
    return tm->n_vocab;
}

/* every child of trie node `at` whose byte state cur accepts; ids ending there join the mask.
 * Plain ASCII text inside a string leaves the state as it is, so those children reuse cur
 * instead of a copy and a feed. */
static int walk(struct tokmask *tm, const struct trie *t, const struct grammar *g, uint32_t at,
                const struct grammar_state *cur, size_t depth, uint32_t *mask)
{
    int n = 0;
    const bool str = grammar_in_string(cur, g);
    struct grammar_state *next = &tm->stack[depth + 1];
    for (uint32_t c = t->nodes[at].child; c; c = t->nodes[c].sibling) {
        const uint8_t b = t->nodes[c].b;
        const struct grammar_state *st = cur;
        if (!str || b < 0x20 || b >= 0x7f || b == '"' || b == '\\') {
            grammar_state_copy(next, cur);
            if (!grammar_feed(next, g, b))
                continue;
            st = next;
        }
        for (int32_t id = t->nodes[c].tok; id >= 0; id = tm->tok_next[id]) {
            mask[id >> 5] |= (uint32_t)1 << (id & 31);
            n++;
        }
        if (t->nodes[c].child)
            n += walk(tm, t, g, c, st, depth + 1, mask);
    }
    return n;
}

int tokmask_compute(struct tokmask *tm, const struct grammar *g, const struct grammar_state *s,
                    uint32_t *mask)
{
    const size_t words = TOKMASK_WORDS(tm->n_vocab);
    if (grammar_in_string(s, g)) {
        memcpy(mask, tm->neutral, sizeof(uint32_t) * words);
        return tm->n_neutral + walk(tm, &tm->special, g, 0, s, 0, mask);
    }
    memset(mask, 0, sizeof(uint32_t) * words);
    return walk(tm, &tm->all, g, 0, s, 0, mask);
}

bool tokmask_advance(const struct tokmask *tm, const struct grammar *g, struct grammar_state *s,
                     int32_t id)
{
    if (id < 0 || id >= tm->n_vocab || !tm->bytes[id])
        return false;
    return grammar_feed_bytes(s, g, tm->bytes[id], tm->lens[id]);
}
