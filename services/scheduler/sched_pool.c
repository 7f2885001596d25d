/* sched_pool: free blocks as a bitset with a summary word per 64 words (first / last free block
 * in n/4096 steps), states as whole chunks of state_blocks blocks (a count of free blocks per
 * chunk and a bitset of the wholly free ones), slots as a free stack; an owner byte per block and
 * slot, so that a double free or a leak shows up in sched_pool_check (and a double free aborts
 * at once). */
#include "sched_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"

enum { OWN_FREE = 0, OWN_KV = 1, OWN_STATE = 2 };

/* A bitset of n bits with one summary bit per word (set when the word is non-zero). */
struct bits {
    uint64_t *w, *sum;
    uint32_t n, n_w, n_sum;
};

struct sched_pool {
    uint32_t block_tokens; // tokens per block
    uint32_t n_blocks;     // blocks in the pool
    uint32_t n_slots;      // sequence slots
    uint32_t state_blocks; // blocks per state, 0 = states outside the pool
    uint32_t n_chunks;     // n_blocks / state_blocks (0 without states in the pool)
    struct bits free_b;    // free blocks
    uint32_t n_free_blocks;
    struct bits whole_c;  // chunks with every block free
    uint32_t *chunk_free; // (n_chunks) free blocks in each chunk
    uint32_t n_states;    // states held
    uint32_t *free_slots; // stack of free slot ids
    uint32_t n_free_slots;
    uint8_t *block_owner; // (n_blocks) OWN_*
    uint8_t *slot_owned;  // (n_slots)
};

static void die_invariant(const char *what, uint32_t id)
{
    fprintf(stderr, "sched_pool: invariant broken: %s id=%u\n", what, id);
    abort();
}

// ---- bitset ----

static void bits_init(struct bits *b, uint32_t n)
{
    b->n = n;
    b->n_w = (n + 63) / 64;
    b->n_sum = (b->n_w + 63) / 64;
    b->w = xcalloc(b->n_w ? b->n_w : 1, sizeof *b->w);
    b->sum = xcalloc(b->n_sum ? b->n_sum : 1, sizeof *b->sum);
}

static void bits_fini(struct bits *b)
{
    free(b->w);
    free(b->sum);
}

static bool bits_get(const struct bits *b, uint32_t i)
{
    return (b->w[i >> 6] >> (i & 63)) & 1u;
}

static void bits_set(struct bits *b, uint32_t i)
{
    b->w[i >> 6] |= 1ull << (i & 63);
    b->sum[i >> 12] |= 1ull << ((i >> 6) & 63);
}

static void bits_clear(struct bits *b, uint32_t i)
{
    uint64_t *w = &b->w[i >> 6];
    *w &= ~(1ull << (i & 63));
    if (!*w)
        b->sum[i >> 12] &= ~(1ull << ((i >> 6) & 63));
}

/* Lowest set bit, UINT32_MAX if none. */
static uint32_t bits_first(const struct bits *b)
{
    for (uint32_t s = 0; s < b->n_sum; s++) {
        if (!b->sum[s])
            continue;
        uint32_t wi = s * 64 + (uint32_t)__builtin_ctzll(b->sum[s]);
        return wi * 64 + (uint32_t)__builtin_ctzll(b->w[wi]);
    }
    return UINT32_MAX;
}

/* Highest set bit, UINT32_MAX if none. */
static uint32_t bits_last(const struct bits *b)
{
    for (uint32_t s = b->n_sum; s-- > 0;) {
        if (!b->sum[s])
            continue;
        uint32_t wi = s * 64 + 63 - (uint32_t)__builtin_clzll(b->sum[s]);
        return wi * 64 + 63 - (uint32_t)__builtin_clzll(b->w[wi]);
    }
    return UINT32_MAX;
}

// ---- blocks and chunks ----

static uint32_t chunk_of(const struct sched_pool *p, uint32_t block)
{
    return p->n_chunks && block < p->n_chunks * p->state_blocks ? block / p->state_blocks
                                                                : UINT32_MAX;
}

static void block_take(struct sched_pool *p, uint32_t b, uint8_t owner)
{
    if (p->block_owner[b] != OWN_FREE || !bits_get(&p->free_b, b))
        die_invariant("free block is owned", b);
    p->block_owner[b] = owner;
    bits_clear(&p->free_b, b);
    p->n_free_blocks--;
    uint32_t c = chunk_of(p, b);
    if (c != UINT32_MAX && p->chunk_free[c]-- == p->state_blocks)
        bits_clear(&p->whole_c, c);
}

static void block_give(struct sched_pool *p, uint32_t b, uint8_t owner)
{
    if (b >= p->n_blocks || p->block_owner[b] != owner || bits_get(&p->free_b, b))
        die_invariant(owner == OWN_STATE ? "double free of state" : "double free of block", b);
    p->block_owner[b] = OWN_FREE;
    bits_set(&p->free_b, b);
    p->n_free_blocks++;
    uint32_t c = chunk_of(p, b);
    if (c != UINT32_MAX && ++p->chunk_free[c] == p->state_blocks)
        bits_set(&p->whole_c, c);
}

struct sched_pool *sched_pool_create(uint32_t n_blocks, uint32_t block_tokens, uint32_t n_slots,
                                     uint32_t state_blocks)
{
    if (n_blocks == 0 || block_tokens == 0 || n_slots == 0 || state_blocks > n_blocks)
        return NULL;
    struct sched_pool *p = xcalloc(1, sizeof *p);
    p->block_tokens = block_tokens;
    p->n_blocks = n_blocks;
    p->n_slots = n_slots;
    p->state_blocks = state_blocks;
    p->n_chunks = state_blocks ? n_blocks / state_blocks : 0;
    bits_init(&p->free_b, n_blocks);
    bits_init(&p->whole_c, p->n_chunks);
    p->chunk_free = xcalloc(p->n_chunks ? p->n_chunks : 1, sizeof *p->chunk_free);
    p->block_owner = xcalloc(n_blocks, 1);
    p->slot_owned = xcalloc(n_slots, 1);
    p->free_slots = xmalloc(sizeof(uint32_t) * n_slots);
    for (uint32_t i = 0; i < n_blocks; i++)
        bits_set(&p->free_b, i);
    p->n_free_blocks = n_blocks;
    for (uint32_t c = 0; c < p->n_chunks; c++) {
        p->chunk_free[c] = state_blocks;
        bits_set(&p->whole_c, c);
    }
    /* lowest ids on top of the stack */
    for (uint32_t i = 0; i < n_slots; i++)
        p->free_slots[i] = n_slots - 1 - i;
    p->n_free_slots = n_slots;
    return p;
}

void sched_pool_destroy(struct sched_pool *p)
{
    if (!p)
        return;
    free(p->free_slots);
    free(p->slot_owned);
    free(p->block_owner);
    free(p->chunk_free);
    bits_fini(&p->whole_c);
    bits_fini(&p->free_b);
    free(p);
}

void sched_pool_seq_init(struct sched_pool_seq *seq)
{
    memset(seq, 0, sizeof *seq);
    seq->slot = -1;
    seq->state_block = SCHED_POOL_NO_STATE;
}

uint32_t sched_pool_blocks_for(const struct sched_pool *p, uint32_t n_tokens)
{
    return (uint32_t)CEIL_DIV((uint64_t)n_tokens, p->block_tokens);
}

bool sched_pool_can_fit_blocks(const struct sched_pool *p, uint32_t kv_blocks)
{
    if (p->n_free_slots == 0)
        return false;
    if (!p->state_blocks)
        return kv_blocks <= p->n_free_blocks;
    return bits_first(&p->whole_c) != UINT32_MAX &&
           (uint64_t)kv_blocks + p->state_blocks <= p->n_free_blocks;
}

bool sched_pool_can_fit(const struct sched_pool *p, uint32_t n_tokens)
{
    return sched_pool_can_fit_blocks(p, sched_pool_blocks_for(p, n_tokens));
}

bool sched_pool_can_ever_fit(const struct sched_pool *p, uint32_t n_tokens)
{
    return (uint64_t)sched_pool_blocks_for(p, n_tokens) + p->state_blocks <= p->n_blocks;
}

uint64_t sched_pool_seq_tokens_max(const struct sched_pool *p)
{
    return (uint64_t)(p->n_blocks - p->state_blocks) * p->block_tokens;
}

int sched_pool_seq_grow(struct sched_pool *p, struct sched_pool_seq *seq, uint32_t n_tokens)
{
    uint32_t need = sched_pool_blocks_for(p, n_tokens);
    if (need <= seq->n_blocks) {
        if (n_tokens > seq->n_tokens)
            seq->n_tokens = n_tokens;
        return 0;
    }
    uint32_t add = need - seq->n_blocks;
    if (add > p->n_free_blocks)
        return ERR_FULL;
    seq->blocks = xrealloc(seq->blocks, sizeof(uint32_t) * need);
    for (uint32_t i = 0; i < add; i++) {
        /* states take the low chunks, KV the high blocks; without states, the lowest first */
        uint32_t b = p->state_blocks ? bits_last(&p->free_b) : bits_first(&p->free_b);
        if (b == UINT32_MAX)
            die_invariant("free count without a free block", p->n_free_blocks);
        block_take(p, b, OWN_KV);
        seq->blocks[seq->n_blocks++] = b;
    }
    seq->n_tokens = n_tokens;
    return 0;
}

int sched_pool_seq_alloc(struct sched_pool *p, uint32_t n_tokens, struct sched_pool_seq *seq)
{
    if (seq->slot >= 0 || seq->n_blocks || seq->state_block != SCHED_POOL_NO_STATE)
        return ERR_STATE;
    if (!sched_pool_can_fit(p, n_tokens))
        return ERR_FULL;
    uint32_t s = p->free_slots[--p->n_free_slots];
    if (p->slot_owned[s])
        die_invariant("free slot is owned", s);
    p->slot_owned[s] = 1;
    seq->slot = (int32_t)s;
    if (p->state_blocks) {
        uint32_t c = bits_first(&p->whole_c);
        for (uint32_t i = 0; i < p->state_blocks; i++)
            block_take(p, c * p->state_blocks + i, OWN_STATE);
        seq->state_block = c * p->state_blocks;
        p->n_states++;
    }
    int rc = sched_pool_seq_grow(p, seq, n_tokens);
    if (rc < 0) {
        sched_pool_seq_free(p, seq);
        return rc;
    }
    return 0;
}

void sched_pool_seq_free(struct sched_pool *p, struct sched_pool_seq *seq)
{
    for (uint32_t i = 0; i < seq->n_blocks; i++)
        block_give(p, seq->blocks[i], OWN_KV);
    if (seq->state_block != SCHED_POOL_NO_STATE) {
        uint32_t b0 = seq->state_block;
        if (!p->state_blocks || b0 % p->state_blocks || b0 / p->state_blocks >= p->n_chunks)
            die_invariant("state outside the chunks", b0);
        for (uint32_t i = 0; i < p->state_blocks; i++)
            block_give(p, b0 + i, OWN_STATE);
        p->n_states--;
    }
    if (seq->slot >= 0) {
        uint32_t s = (uint32_t)seq->slot;
        if (s >= p->n_slots || !p->slot_owned[s])
            die_invariant("double free of slot", s);
        p->slot_owned[s] = 0;
        p->free_slots[p->n_free_slots++] = s;
    }
    free(seq->blocks);
    sched_pool_seq_init(seq);
}

uint32_t sched_pool_blocks_total(const struct sched_pool *p)
{
    return p->n_blocks;
}
uint32_t sched_pool_blocks_used(const struct sched_pool *p)
{
    return p->n_blocks - p->n_free_blocks;
}
uint32_t sched_pool_blocks_free(const struct sched_pool *p)
{
    return p->n_free_blocks;
}
uint32_t sched_pool_slots_total(const struct sched_pool *p)
{
    return p->n_slots;
}
uint32_t sched_pool_slots_used(const struct sched_pool *p)
{
    return p->n_slots - p->n_free_slots;
}
uint32_t sched_pool_block_tokens(const struct sched_pool *p)
{
    return p->block_tokens;
}
uint32_t sched_pool_state_blocks(const struct sched_pool *p)
{
    return p->state_blocks;
}

static int check_blocks(const struct sched_pool *p)
{
    uint32_t n_free = 0, n_state = 0;
    for (uint32_t b = 0; b < p->n_blocks; b++) {
        bool is_free = bits_get(&p->free_b, b);
        if (is_free != (p->block_owner[b] == OWN_FREE))
            return ERR_STATE;
        n_free += is_free;
        n_state += p->block_owner[b] == OWN_STATE;
    }
    for (uint32_t w = 0; w < p->free_b.n_w; w++) /* summary bits follow the words */
        if (((p->free_b.sum[w >> 6] >> (w & 63)) & 1u) != (p->free_b.w[w] != 0))
            return ERR_STATE;
    if (n_free != p->n_free_blocks || n_state != p->n_states * p->state_blocks)
        return ERR_STATE;
    for (uint32_t c = 0; c < p->n_chunks; c++) {
        uint32_t f = 0, st = 0;
        for (uint32_t i = 0; i < p->state_blocks; i++) {
            f += p->block_owner[c * p->state_blocks + i] == OWN_FREE;
            st += p->block_owner[c * p->state_blocks + i] == OWN_STATE;
        }
        /* a chunk is a whole state or none of it */
        if (f != p->chunk_free[c] || (st && st != p->state_blocks) ||
            bits_get(&p->whole_c, c) != (f == p->state_blocks))
            return ERR_STATE;
    }
    for (uint32_t b = p->n_chunks * p->state_blocks; b < p->n_blocks; b++)
        if (p->block_owner[b] == OWN_STATE)
            return ERR_STATE;
    return 0;
}

static int check_slots(const struct sched_pool *p)
{
    uint8_t *seen = xcalloc(p->n_slots, 1);
    int rc = 0;
    uint32_t n_owned = 0;
    for (uint32_t i = 0; i < p->n_free_slots && rc == 0; i++) {
        uint32_t id = p->free_slots[i];
        if (id >= p->n_slots || seen[id] || p->slot_owned[id])
            rc = ERR_STATE;
        else
            seen[id] = 1;
    }
    for (uint32_t i = 0; i < p->n_slots; i++)
        n_owned += p->slot_owned[i] ? 1 : 0;
    if (n_owned + p->n_free_slots != p->n_slots)
        rc = ERR_STATE;
    /* in the pool, every live sequence holds exactly one state */
    if (p->state_blocks && n_owned != p->n_states)
        rc = ERR_STATE;
    free(seen);
    return rc;
}

int sched_pool_check(const struct sched_pool *p)
{
    int rc = check_blocks(p);
    if (rc < 0)
        return rc;
    return check_slots(p);
}
