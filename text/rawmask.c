/* rawmask: see text/rawmask.h. The raw-neutral tokens leave a raw-text state where it was, so
 * they are allowed there without a walk; the others go through a tokmask that holds only them. */
#include "text/rawmask.h"

#include <stdlib.h>

#include "common/xalloc.h"
#include "text/tokmask.h"

struct rawmask {
    int n_vocab;
    uint32_t *neutral;      // (TOKMASK_WORDS(n_vocab)) the raw-neutral tokens
    int n_neutral;          // bits set in neutral
    struct tokmask *others; // the tokens with bytes that are not raw-neutral
    uint32_t *scratch;      // (TOKMASK_WORDS(n_vocab)) their mask
};

struct rawmask *rawmask_create(int n_vocab, const char *const *bytes, const size_t *lens)
{
    if (n_vocab <= 0)
        return NULL;
    struct rawmask *rm = xcalloc(1, sizeof(*rm));
    rm->n_vocab = n_vocab;
    rm->neutral = xcalloc(TOKMASK_WORDS(n_vocab), sizeof(uint32_t));
    rm->scratch = xcalloc(TOKMASK_WORDS(n_vocab), sizeof(uint32_t));
    const char **ob = xcalloc((size_t)n_vocab, sizeof(char *));
    size_t *ol = xcalloc((size_t)n_vocab, sizeof(size_t));
    for (int id = 0; id < n_vocab; id++) {
        if (!bytes[id] || !lens[id])
            continue;
        if (grammar_is_raw_neutral(bytes[id], lens[id])) {
            rm->neutral[id >> 5] |= (uint32_t)1 << (id & 31);
            rm->n_neutral++;
        } else {
            ob[id] = bytes[id];
            ol[id] = lens[id];
        }
    }
    rm->others = tokmask_create(n_vocab, ob, ol);
    free(ob);
    free(ol);
    return rm;
}

void rawmask_destroy(struct rawmask *rm)
{
    if (!rm)
        return;
    tokmask_destroy(rm->others);
    free(rm->neutral);
    free(rm->scratch);
    free(rm);
}

int rawmask_compute(struct rawmask *rm, const struct grammar *g, const struct grammar_state *s,
                    uint32_t *mask)
{
    int n = tokmask_compute(rm->others, g, s, rm->scratch);
    const size_t words = TOKMASK_WORDS(rm->n_vocab);
    for (size_t i = 0; i < words; i++)
        mask[i] = rm->neutral[i] | rm->scratch[i];
    return n + rm->n_neutral;
}
