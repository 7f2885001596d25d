/* sched_pool: one worker's cache accounting, owned by the scheduler (the only writer). This is
 * the exact hybrid model of docs/KV.md (common/kv_plan): a KV block holds block_tokens tokens of
 * EVERY attention layer (and the MTP layer when speculating), so one block table serves all
 * layers. A sequence holds a slot (the worker's handle for it: at most n_slots at once) and
 * ceil(tokens / block_tokens) blocks, plus its GDN state (conv window + recurrent S of every GDN
 * layer), which does not grow. Where the state lives is the worker's choice, from its Register:
 *   - state_blocks == 0 (slots): in the slot, memory of its own outside the pool;
 *   - state_blocks > 0 (in the pool): state_blocks consecutive blocks of the pool, starting at a
 *     multiple of state_blocks (a "chunk"), taken at admission and freed with the sequence.
 *     States take the lowest free chunks and KV blocks the highest free blocks, so that the two
 *     meet in the middle and freed KV leaves whole chunks behind. A new sequence needs one whole
 *     free chunk; KV growth needs single blocks anywhere, so preemption keeps its promise.
 * The counts come from the worker's Register (sized there by kv_plan_compute from the same config
 * and budget). Block, slot and state ids index the worker's memory; the worker trusts them after
 * a bounds check. */
#ifndef SCHED_POOL_H
#define SCHED_POOL_H

#include <stdbool.h>
#include <stdint.h>

struct sched_pool;

#define SCHED_POOL_NO_STATE UINT32_MAX

/* One sequence's holdings. Filled by sched_pool_seq_alloc, emptied by sched_pool_seq_free. */
struct sched_pool_seq {
    int32_t slot;         // the worker's sequence slot, -1 = none
    uint32_t state_block; // first block of its GDN state in the pool, or SCHED_POOL_NO_STATE
    uint32_t *blocks;     // block table, n_blocks entries (owned by the pool functions)
    uint32_t n_blocks;
    uint32_t n_tokens; // tokens the blocks were sized for
};

/* n_blocks KV blocks of block_tokens tokens, n_slots sequence slots, and state_blocks blocks per
 * sequence state (0: state outside the pool). NULL on bad sizes (a state larger than the pool). */
struct sched_pool *sched_pool_create(uint32_t n_blocks, uint32_t block_tokens, uint32_t n_slots,
                                     uint32_t state_blocks);
void sched_pool_destroy(struct sched_pool *p);

uint32_t sched_pool_blocks_for(const struct sched_pool *p, uint32_t n_tokens);
/* Whether a new sequence whose KV takes kv_blocks blocks fits now (a free slot, a free state
 * chunk when the state is in the pool, and the blocks besides). */
bool sched_pool_can_fit_blocks(const struct sched_pool *p, uint32_t kv_blocks);
/* The same for a sequence of n_tokens. */
bool sched_pool_can_fit(const struct sched_pool *p, uint32_t n_tokens);
/* Whether a sequence of n_tokens could fit in the empty pool at all. */
bool sched_pool_can_ever_fit(const struct sched_pool *p, uint32_t n_tokens);
/* Most KV tokens one sequence can ever hold (the pool less one state). */
uint64_t sched_pool_seq_tokens_max(const struct sched_pool *p);
/* Take a slot, the state (in the pool) and the blocks for n_tokens into seq (which must be
 * empty). ERR_FULL if not now. */
int sched_pool_seq_alloc(struct sched_pool *p, uint32_t n_tokens, struct sched_pool_seq *seq);
/* Grow seq's blocks to hold n_tokens. ERR_FULL (seq unchanged) if the blocks are not there. */
int sched_pool_seq_grow(struct sched_pool *p, struct sched_pool_seq *seq, uint32_t n_tokens);
/* Return everything seq holds; seq becomes empty. No-op on an empty seq. */
void sched_pool_seq_free(struct sched_pool *p, struct sched_pool_seq *seq);
void sched_pool_seq_init(struct sched_pool_seq *seq);

uint32_t sched_pool_blocks_total(const struct sched_pool *p);
/* Blocks held, by KV and (in the pool) by states. */
uint32_t sched_pool_blocks_used(const struct sched_pool *p);
uint32_t sched_pool_slots_total(const struct sched_pool *p);
uint32_t sched_pool_slots_used(const struct sched_pool *p);
uint32_t sched_pool_block_tokens(const struct sched_pool *p);
/* Blocks per state (0: states outside the pool). */
uint32_t sched_pool_state_blocks(const struct sched_pool *p);
/* Free blocks (for "most headroom" placement). */
uint32_t sched_pool_blocks_free(const struct sched_pool *p);

/* Check the invariants: every block, slot and state chunk is either free or owned exactly once,
 * and the counts match. Returns 0 or ERR_STATE. */
int sched_pool_check(const struct sched_pool *p);

#endif
