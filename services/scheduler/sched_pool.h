/* sched_pool: one worker's cache accounting, owned by the scheduler (the only writer). This is
 * the exact hybrid model of docs/KV.md (common/kv_plan): a KV block holds block_tokens tokens of
 * EVERY attention layer (and the MTP layer when speculating), so one block table serves all
 * layers; a state slot holds one sequence's whole GDN state (conv window + recurrent S of every
 * GDN layer), which does not grow. A sequence holds one slot and ceil(tokens / block_tokens)
 * blocks. The counts come from the worker's Register (sized there by kv_plan_compute from the
 * same config and budget). Block ids and slot ids index the worker's memory; the worker trusts
 * them after a bounds check. */
#ifndef SCHED_POOL_H
#define SCHED_POOL_H

#include <stdbool.h>
#include <stdint.h>

struct sched_pool;

/* One sequence's holdings. Filled by sched_pool_seq_alloc, emptied by sched_pool_seq_free. */
struct sched_pool_seq {
    int32_t slot;     // GDN state slot, -1 = none
    uint32_t *blocks; // block table, n_blocks entries (owned by the pool functions)
    uint32_t n_blocks;
    uint32_t n_tokens; // tokens the blocks were sized for
};

/* n_blocks KV blocks of block_tokens tokens and n_slots state slots. NULL on bad sizes. */
struct sched_pool *sched_pool_create(uint32_t n_blocks, uint32_t block_tokens, uint32_t n_slots);
void sched_pool_destroy(struct sched_pool *p);

uint32_t sched_pool_blocks_for(const struct sched_pool *p, uint32_t n_tokens);
/* Whether a new sequence of n_tokens fits now (a free slot and enough free blocks). */
bool sched_pool_can_fit(const struct sched_pool *p, uint32_t n_tokens);
/* Whether a sequence of n_tokens could fit in the empty pool at all. */
bool sched_pool_can_ever_fit(const struct sched_pool *p, uint32_t n_tokens);
/* Take a slot and the blocks for n_tokens into seq (which must be empty). ERR_FULL if not now. */
int sched_pool_seq_alloc(struct sched_pool *p, uint32_t n_tokens, struct sched_pool_seq *seq);
/* Grow seq's blocks to hold n_tokens. ERR_FULL (seq unchanged) if the blocks are not there. */
int sched_pool_seq_grow(struct sched_pool *p, struct sched_pool_seq *seq, uint32_t n_tokens);
/* Return everything seq holds; seq becomes empty. No-op on an empty seq. */
void sched_pool_seq_free(struct sched_pool *p, struct sched_pool_seq *seq);
void sched_pool_seq_init(struct sched_pool_seq *seq);

uint32_t sched_pool_blocks_total(const struct sched_pool *p);
uint32_t sched_pool_blocks_used(const struct sched_pool *p);
uint32_t sched_pool_slots_total(const struct sched_pool *p);
uint32_t sched_pool_slots_used(const struct sched_pool *p);
uint32_t sched_pool_block_tokens(const struct sched_pool *p);
/* Free blocks (for "most headroom" placement). */
uint32_t sched_pool_blocks_free(const struct sched_pool *p);

/* Check the invariants: every block and slot is either free or owned exactly once, and the
 * counts match. Returns 0 or ERR_STATE. */
int sched_pool_check(const struct sched_pool *p);

#endif
