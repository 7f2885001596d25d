/* sched_reqs: the request table (dense array + open-addressing index on req_id) and the FIFO
 * waiting queue (intrusive doubly linked list through sched_req). */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "sched_internal.h"

struct sched_reqs {
    struct sched_req **items; // (n) dense
    uint32_t n, cap;
    uint32_t *index;  // (n_index) slot -> items position + 1; 0 = empty
    uint32_t n_index; // power of two, >= 2 * cap
};

static uint32_t hash_id(uint64_t id, uint32_t mask)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return (uint32_t)id & mask;
}

static void reindex(struct sched_reqs *t)
{
    memset(t->index, 0, sizeof(uint32_t) * t->n_index);
    uint32_t mask = t->n_index - 1;
    for (uint32_t i = 0; i < t->n; i++) {
        uint32_t h = hash_id(t->items[i]->id, mask);
        while (t->index[h])
            h = (h + 1) & mask;
        t->index[h] = i + 1;
    }
}

struct sched_reqs *sched_reqs_create(void)
{
    struct sched_reqs *t = xcalloc(1, sizeof *t);
    t->cap = 64;
    t->items = xmalloc(sizeof *t->items * t->cap);
    t->n_index = 256;
    t->index = xcalloc(t->n_index, sizeof(uint32_t));
    return t;
}

void sched_req_destroy(struct sched_req *r)
{
    if (!r)
        return;
    free(r->prompt);
    free(r->gen);
    free(r->resume_ids);
    free(r->stop_ids);
    free(r->samp.bias_ids);
    free(r->samp.bias_vals);
    free(r->samp.json_schema);
    free(r->seq.blocks);
    free(r);
}

void sched_reqs_destroy(struct sched_reqs *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        sched_req_destroy(t->items[i]);
    free(t->items);
    free(t->index);
    free(t);
}

/* Position in index of id, or -1. */
static int64_t find_slot(const struct sched_reqs *t, uint64_t id)
{
    uint32_t mask = t->n_index - 1;
    uint32_t h = hash_id(id, mask);
    while (t->index[h]) {
        if (t->items[t->index[h] - 1]->id == id)
            return h;
        h = (h + 1) & mask;
    }
    return -1;
}

int sched_reqs_add(struct sched_reqs *t, struct sched_req *r)
{
    if (find_slot(t, r->id) >= 0)
        return ERR_STATE;
    if (t->n == t->cap) {
        t->cap *= 2;
        t->items = xrealloc(t->items, sizeof *t->items * t->cap);
        t->n_index = t->cap * 4;
        t->index = xrealloc(t->index, sizeof(uint32_t) * t->n_index);
        reindex(t);
    }
    t->items[t->n++] = r;
    uint32_t mask = t->n_index - 1;
    uint32_t h = hash_id(r->id, mask);
    while (t->index[h])
        h = (h + 1) & mask;
    t->index[h] = t->n;
    return 0;
}

struct sched_req *sched_reqs_find(const struct sched_reqs *t, uint64_t id)
{
    int64_t h = find_slot(t, id);
    return h < 0 ? NULL : t->items[t->index[h] - 1];
}

void sched_reqs_remove(struct sched_reqs *t, struct sched_req *r)
{
    int64_t h = find_slot(t, r->id);
    if (h < 0)
        return;
    uint32_t pos = t->index[h] - 1;
    t->items[pos] = t->items[--t->n];
    /* simplest correct delete for linear probing at this size: rebuild the index */
    reindex(t);
}

uint32_t sched_reqs_count(const struct sched_reqs *t)
{
    return t->n;
}

struct sched_req *sched_reqs_at(const struct sched_reqs *t, uint32_t i)
{
    return i < t->n ? t->items[i] : NULL;
}

// ---- waiting queue ----

void sched_queue_push_back(struct sched *s, struct sched_req *r)
{
    r->q_prev = s->q_tail;
    r->q_next = NULL;
    if (s->q_tail)
        s->q_tail->q_next = r;
    else
        s->q_head = r;
    s->q_tail = r;
    r->queued = true;
    r->state = SCHED_REQ_STATE_QUEUED;
    s->n_queued++;
}

void sched_queue_push_front(struct sched *s, struct sched_req *r)
{
    r->q_next = s->q_head;
    r->q_prev = NULL;
    if (s->q_head)
        s->q_head->q_prev = r;
    else
        s->q_tail = r;
    s->q_head = r;
    r->queued = true;
    r->state = SCHED_REQ_STATE_QUEUED;
    s->n_queued++;
}

void sched_queue_remove(struct sched *s, struct sched_req *r)
{
    if (!r->queued)
        return;
    if (r->q_prev)
        r->q_prev->q_next = r->q_next;
    else
        s->q_head = r->q_next;
    if (r->q_next)
        r->q_next->q_prev = r->q_prev;
    else
        s->q_tail = r->q_prev;
    r->q_prev = r->q_next = NULL;
    r->queued = false;
    s->n_queued--;
}
