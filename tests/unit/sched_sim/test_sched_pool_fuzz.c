/* Fuzz of the scheduler's allocator (sched_pool): random pool sizes, states outside the pool or
 * in it (state_blocks > 0), and random alloc / grow / free sequences against a plain model (how
 * many blocks and slots each sequence should hold, how many are free, which blocks each holds).
 * Every result code is predicted by the model (in the pool: a new sequence fits when some aligned
 * chunk of state_blocks blocks is wholly free in the model's map and the KV blocks fit besides),
 * sched_pool_check passes after every operation, no block id appears in two sequences (a state's
 * blocks included), and everything is free at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "sched_pool.h"
#include "test.h"

#define MAX_SEQS 64

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return n ? (uint32_t)(rng % n) : 0;
}

/* The blocks the sequences hold (states too) into b (nb), checking that none is held twice. */
static void held_map(const struct sched_pool_seq *s, int n, uint32_t nb, uint32_t ns, uint32_t sb,
                     uint8_t *b)
{
    uint8_t *sl = xcalloc(ns, 1);
    memset(b, 0, nb);
    for (int i = 0; i < n; i++) {
        if (s[i].slot >= 0) {
            CHECK((uint32_t)s[i].slot < ns && !sl[s[i].slot]);
            sl[s[i].slot] = 1;
            /* a state exactly when the pool holds states */
            CHECK_EQ_INT(s[i].state_block != SCHED_POOL_NO_STATE, sb > 0);
        }
        if (s[i].state_block != SCHED_POOL_NO_STATE) {
            CHECK(sb > 0 && s[i].state_block % sb == 0 && s[i].state_block + sb <= nb);
            for (uint32_t k = 0; k < sb && s[i].state_block + k < nb; k++) {
                CHECK(!b[s[i].state_block + k]);
                b[s[i].state_block + k] = 1;
            }
        }
        for (uint32_t k = 0; k < s[i].n_blocks; k++) {
            CHECK(s[i].blocks[k] < nb && !b[s[i].blocks[k]]);
            b[s[i].blocks[k]] = 1;
        }
    }
    free(sl);
}

/* Whether some aligned chunk of sb blocks is wholly free in the map. */
static bool chunk_free(const uint8_t *b, uint32_t nb, uint32_t sb)
{
    for (uint32_t c = 0; sb && (c + 1) * sb <= nb; c++) {
        uint32_t k = 0;
        while (k < sb && !b[c * sb + k])
            k++;
        if (k == sb)
            return true;
    }
    return false;
}

int main(void)
{
    uint64_t ops = 0, full = 0, n_pool = 0;
    for (int round = 0; round < 200 && !test_failures_; round++) {
        uint32_t bt = 1 + rnd(32);
        uint32_t nb = 1 + rnd(300);
        uint32_t ns = 1 + rnd(MAX_SEQS);
        uint32_t sb = rnd(2) ? 0 : 1 + rnd(nb / 4 + 1); /* half the rounds: states in the pool */
        if (sb > nb)
            sb = nb;
        CHECK(sched_pool_create(nb, bt, ns, nb + 1) == NULL); /* a state larger than the pool */
        struct sched_pool *p = sched_pool_create(nb, bt, ns, sb);
        CHECK(p != NULL);
        uint8_t *map = xcalloc(nb, 1);
        struct sched_pool_seq s[MAX_SEQS];
        uint32_t want_blocks[MAX_SEQS] = {0};
        for (int i = 0; i < MAX_SEQS; i++)
            sched_pool_seq_init(&s[i]);
        uint32_t free_b = nb, free_s = ns;
        for (int step = 0; step < 2000 && !test_failures_; step++, ops++) {
            int i = (int)rnd(MAX_SEQS);
            uint32_t tokens = rnd(nb * bt / 2 + 2);
            uint32_t need = (tokens + bt - 1) / bt;
            switch (rnd(3)) {
            case 0: { /* alloc */
                held_map(s, MAX_SEQS, nb, ns, sb, map);
                bool fits = free_s > 0 && need + sb <= free_b && (!sb || chunk_free(map, nb, sb));
                CHECK_EQ_INT(sched_pool_can_fit(p, tokens), fits);
                CHECK_EQ_INT(sched_pool_can_ever_fit(p, tokens), need + sb <= nb);
                CHECK_EQ_INT(sched_pool_seq_tokens_max(p), (uint64_t)(nb - sb) * bt);
                bool held = s[i].slot >= 0;
                int rc = sched_pool_seq_alloc(p, tokens, &s[i]);
                if (held) {
                    CHECK_EQ_INT(rc, ERR_STATE); /* not empty: refused, unchanged */
                    break;
                }
                CHECK_EQ_INT(rc, fits ? 0 : ERR_FULL);
                if (rc == 0) {
                    free_s--;
                    free_b -= need + sb;
                    want_blocks[i] = need;
                } else {
                    full++;
                }
                break;
            }
            case 1: { /* grow */
                if (s[i].slot < 0)
                    break;
                uint32_t add = need > want_blocks[i] ? need - want_blocks[i] : 0;
                int rc = sched_pool_seq_grow(p, &s[i], tokens);
                CHECK_EQ_INT(rc, add <= free_b ? 0 : ERR_FULL);
                if (rc == 0) {
                    free_b -= add;
                    want_blocks[i] += add;
                }
                break;
            }
            default: /* free */
                if (s[i].slot >= 0) {
                    free_s++;
                    free_b += want_blocks[i] + sb;
                    want_blocks[i] = 0;
                }
                sched_pool_seq_free(p, &s[i]);
                break;
            }
            CHECK_EQ_INT(s[i].n_blocks, want_blocks[i]);
            CHECK_EQ_INT(sched_pool_blocks_free(p), free_b);
            CHECK_EQ_INT(sched_pool_blocks_used(p), nb - free_b);
            CHECK_EQ_INT(sched_pool_slots_used(p), ns - free_s);
            CHECK_EQ_INT(sched_pool_check(p), 0);
            if (step % 97 == 0)
                held_map(s, MAX_SEQS, nb, ns, sb, map);
        }
        for (int i = 0; i < MAX_SEQS; i++)
            sched_pool_seq_free(p, &s[i]);
        CHECK_EQ_INT(sched_pool_blocks_used(p), 0);
        CHECK_EQ_INT(sched_pool_slots_used(p), 0);
        CHECK_EQ_INT(sched_pool_check(p), 0);
        sched_pool_destroy(p);
        free(map);
        n_pool += sb > 0;
    }
    printf("pool fuzz: ops=%llu refused_full=%llu rounds_states_in_pool=%llu\n",
           (unsigned long long)ops, (unsigned long long)full, (unsigned long long)n_pool);
    CHECK(n_pool > 50 && n_pool < 150);
    return test_result();
}
