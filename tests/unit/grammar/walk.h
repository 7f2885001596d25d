/* walk.h: the random token walks of the grammar unit tests: an xorshift stream and the pick of
 * an allowed id from a mask. */
#ifndef TESTS_GRAMMAR_WALK_H
#define TESTS_GRAMMAR_WALK_H

#include <stdint.h>

static inline uint32_t walk_rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* An id whose bit is set in mask (nv ids): one of 64 random tries, else the lowest; -1 when the
 * mask is empty. */
static inline int walk_pick(const uint32_t *mask, int nv, uint64_t *s)
{
    for (int tries = 0; tries < 64; tries++) {
        int id = (int)(walk_rnd(s) % (uint32_t)nv);
        if (mask[id >> 5] >> (id & 31) & 1)
            return id;
    }
    for (int id = 0; id < nv; id++)
        if (mask[id >> 5] >> (id & 31) & 1)
            return id;
    return -1;
}

#endif
