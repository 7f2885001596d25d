/* sched_pool: free stacks of block ids and slot ids plus an owned bit per id, so that a double
 * free or a leak shows up in sched_pool_check (and a double free aborts at once). */
#include "sched_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"

struct sched_pool {
    uint32_t block_tokens; // tokens per block
    uint32_t n_blocks;     // blocks in the pool
    uint32_t n_slots;      // state slots in the pool
    uint32_t *free_blocks; // stack of free block ids, n_free_blocks deep
    uint32_t n_free_blocks;
    uint32_t *free_slots; // stack of free slot ids
    uint32_t n_free_slots;
    uint8_t *block_owned; // (n_blocks) 1 = held by a sequence
    uint8_t *slot_owned;  // (n_slots)
};

static void die_invariant(const char *what, uint32_t id)
{
    fprintf(stderr, "sched_pool: invariant broken: %s id=%u\n", what, id);
    abort();
}

struct sched_pool *sched_pool_create(uint32_t n_blocks, uint32_t block_tokens, uint32_t n_slots)
{
    if (n_blocks == 0 || block_tokens == 0 || n_slots == 0)
        return NULL;
    struct sched_pool *p = xcalloc(1, sizeof *p);
    p->block_tokens = block_tokens;
    p->n_blocks = n_blocks;
    p->n_slots = n_slots;
    p->free_blocks = xmalloc(sizeof(uint32_t) * n_blocks);
    p->free_slots = xmalloc(sizeof(uint32_t) * n_slots);
    p->block_owned = xcalloc(n_blocks, 1);
    p->slot_owned = xcalloc(n_slots, 1);
    /* lowest ids on top of the stacks */
    for (uint32_t i = 0; i < n_blocks; i++)
        p->free_blocks[i] = n_blocks - 1 - i;
    for (uint32_t i = 0; i < n_slots; i++)
        p->free_slots[i] = n_slots - 1 - i;
    p->n_free_blocks = n_blocks;
    p->n_free_slots = n_slots;
    return p;
}

void sched_pool_destroy(struct sched_pool *p)
{
    if (!p)
        return;
    free(p->free_blocks);
    free(p->free_slots);
    free(p->block_owned);
    free(p->slot_owned);
    free(p);
}

void sched_pool_seq_init(struct sched_pool_seq *seq)
{
    memset(seq, 0, sizeof *seq);
    seq->slot = -1;
}

uint32_t sched_pool_blocks_for(const struct sched_pool *p, uint32_t n_tokens)
{
    return (uint32_t)CEIL_DIV((uint64_t)n_tokens, p->block_tokens);
}

bool sched_pool_can_fit(const struct sched_pool *p, uint32_t n_tokens)
{
    return p->n_free_slots > 0 && sched_pool_blocks_for(p, n_tokens) <= p->n_free_blocks;
}

bool sched_pool_can_ever_fit(const struct sched_pool *p, uint32_t n_tokens)
{
    return sched_pool_blocks_for(p, n_tokens) <= p->n_blocks;
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
        uint32_t b = p->free_blocks[--p->n_free_blocks];
        if (p->block_owned[b])
            die_invariant("free block is owned", b);
        p->block_owned[b] = 1;
        seq->blocks[seq->n_blocks++] = b;
    }
    seq->n_tokens = n_tokens;
    return 0;
}

int sched_pool_seq_alloc(struct sched_pool *p, uint32_t n_tokens, struct sched_pool_seq *seq)
{
    if (seq->slot >= 0 || seq->n_blocks)
        return ERR_STATE;
    if (!sched_pool_can_fit(p, n_tokens))
        return ERR_FULL;
    uint32_t s = p->free_slots[--p->n_free_slots];
    if (p->slot_owned[s])
        die_invariant("free slot is owned", s);
    p->slot_owned[s] = 1;
    seq->slot = (int32_t)s;
    int rc = sched_pool_seq_grow(p, seq, n_tokens);
    if (rc < 0) {
        sched_pool_seq_free(p, seq);
        return rc;
    }
    return 0;
}

void sched_pool_seq_free(struct sched_pool *p, struct sched_pool_seq *seq)
{
    for (uint32_t i = 0; i < seq->n_blocks; i++) {
        uint32_t b = seq->blocks[i];
        if (b >= p->n_blocks || !p->block_owned[b])
            die_invariant("double free of block", b);
        p->block_owned[b] = 0;
        p->free_blocks[p->n_free_blocks++] = b;
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

static int check_side(const uint32_t *stack, uint32_t depth, const uint8_t *owned, uint32_t n)
{
    uint8_t *seen = xcalloc(n ? n : 1, 1);
    int rc = 0;
    uint32_t n_owned = 0;
    for (uint32_t i = 0; i < depth && rc == 0; i++) {
        uint32_t id = stack[i];
        if (id >= n || seen[id] || owned[id])
            rc = ERR_STATE;
        else
            seen[id] = 1;
    }
    for (uint32_t i = 0; i < n; i++)
        n_owned += owned[i] ? 1 : 0;
    if (n_owned + depth != n)
        rc = ERR_STATE;
    free(seen);
    return rc;
}

int sched_pool_check(const struct sched_pool *p)
{
    int rc = check_side(p->free_blocks, p->n_free_blocks, p->block_owned, p->n_blocks);
    if (rc < 0)
        return rc;
    return check_side(p->free_slots, p->n_free_slots, p->slot_owned, p->n_slots);
}
