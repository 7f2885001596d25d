/* Simulation: the real scheduler core (no sockets, sim.h transport) under thousands of random
 * requests from two gateways and three fake workers, with aborts, gateway disconnects, worker
 * deaths and returns, and pools small enough that decode growth preempts. The fake workers check
 * every plan against their own mirror of who holds which block and slot (a block handed to two
 * live sequences, a write past the block table, a slot reused while live, a position gap all
 * fail; one worker keeps its GDN states in the pool, and a state chunk that is misaligned, out of
 * range or overlaps a live sequence's blocks fails too). After EVERY tick: the scheduler's pools
 * pass sched_pool_check, every block and slot is held by exactly one placed request, nothing is
 * held by a queued one, n_running matches. At the end: every request got exactly one terminal
 * message (or was dropped with its gateway), the tables are empty and every pool and every fake
 * worker is back to zero. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "sim.h"
#include "test.h"

#define N_WORKERS 3
#define N_GWS 2
#define VOCAB 1000u
#define EOS 999u
#define MAX_LEN 512u
#define BLOCK_TOKENS 16u
#define MAX_TICKS 400000u

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return n ? (uint32_t)(rng_state % n) : 0;
}

// ---- fake worker ----

struct wseq {
    uint64_t id;
    uint32_t slot;
    uint32_t state_block; // first block of its state (workers with state_blocks), else UINT32_MAX
    uint32_t *blocks;
    uint32_t n_blocks;
    uint32_t pos; // next KV position to write
    uint32_t n_gen, max_new;
    uint32_t stop[8];
    uint32_t n_stop;
    bool stopped;
};

enum fw_state { FW_DOWN = 0, FW_UP, FW_SILENT };

struct fworker {
    enum fw_state state;
    int incarnation;
    char name[16];
    struct msg_peer peer;
    uint32_t kv_blocks, slots, max_seqs, max_step;
    uint32_t state_blocks; // > 0: GDN states are blocks of the pool
    int32_t *block_owner;  // (kv_blocks) index into seqs, -1 free (a state's blocks included)
    int32_t *slot_owner;  // (slots)
    struct wseq *seqs;
    uint32_t n_seqs;
    Tern__Envelope **plans; // queued StepPlans, FIFO
    uint32_t n_plans, cap_plans;
    uint64_t last_step;
    uint64_t back_at; // FW_DOWN: returns at this tick
};

static struct fworker W[N_WORKERS];
static uint32_t n_contract_errors;
static uint64_t n_pool_states; /* sequences opened with their state in a pool */

#define CONTRACT(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "contract: " __VA_ARGS__);                                             \
            fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);                                     \
            n_contract_errors++;                                                                   \
        }                                                                                          \
    } while (0)

static void fw_reset_state(struct fworker *w)
{
    for (uint32_t i = 0; i < w->n_seqs; i++)
        free(w->seqs[i].blocks);
    w->n_seqs = 0;
    for (uint32_t i = 0; i < w->kv_blocks; i++)
        w->block_owner[i] = -1;
    for (uint32_t i = 0; i < w->slots; i++)
        w->slot_owner[i] = -1;
    for (uint32_t i = 0; i < w->n_plans; i++)
        tern__envelope__free_unpacked(w->plans[i], NULL);
    w->n_plans = 0;
    w->last_step = 0;
}

static void fw_start(struct sched *s, struct fworker *w, uint64_t now)
{
    fw_reset_state(w);
    w->incarnation++;
    char pname[32];
    snprintf(pname, sizeof pname, "%s-%d", w->name, w->incarnation);
    w->peer = sim_peer(pname);
    w->state = FW_UP;
    sim_register_instance(s, &w->peer, w->name, 0, w->kv_blocks, w->state_blocks, BLOCK_TOKENS,
                          w->slots, w->max_seqs, MAX_LEN, VOCAB, EOS, w->max_step, now);
}

static int32_t fw_find(const struct fworker *w, uint64_t id)
{
    for (uint32_t i = 0; i < w->n_seqs; i++)
        if (w->seqs[i].id == id)
            return (int32_t)i;
    return -1;
}

static void fw_drop(struct fworker *w, int32_t k)
{
    struct wseq *q = &w->seqs[k];
    for (uint32_t i = 0; i < q->n_blocks; i++)
        w->block_owner[q->blocks[i]] = -1;
    for (uint32_t i = 0; q->state_block != UINT32_MAX && i < w->state_blocks; i++)
        w->block_owner[q->state_block + i] = -1;
    w->slot_owner[q->slot] = -1;
    free(q->blocks);
    int32_t last = (int32_t)w->n_seqs - 1;
    if (k != last) { /* move the last one into k: renumber its holdings */
        w->seqs[k] = w->seqs[last];
        for (uint32_t i = 0; i < w->seqs[k].n_blocks; i++)
            w->block_owner[w->seqs[k].blocks[i]] = k;
        for (uint32_t i = 0; w->seqs[k].state_block != UINT32_MAX && i < w->state_blocks; i++)
            w->block_owner[w->seqs[k].state_block + i] = k;
        w->slot_owner[w->seqs[k].slot] = k;
    }
    w->n_seqs--;
}

/* Install a new block table for seq k: it must extend the old one and use free blocks only. */
static void fw_table(struct fworker *w, int32_t k, const uint32_t *bt, size_t n)
{
    struct wseq *q = &w->seqs[k];
    CONTRACT(n >= q->n_blocks, "block table shrank req=%" PRIx64, q->id);
    for (uint32_t i = 0; i < q->n_blocks && i < n; i++)
        CONTRACT(bt[i] == q->blocks[i], "block table rewritten req=%" PRIx64, q->id);
    for (size_t i = q->n_blocks; i < n; i++) {
        if (bt[i] >= w->kv_blocks) {
            CONTRACT(0, "block id out of range");
            return;
        }
        CONTRACT(w->block_owner[bt[i]] == -1,
                 "block %u handed to req=%" PRIx64 " while held by another live sequence", bt[i],
                 q->id);
    }
    for (size_t i = q->n_blocks; i < n; i++)
        w->block_owner[bt[i]] = k;
    q->blocks = xrealloc(q->blocks, sizeof(uint32_t) * (n ? n : 1));
    memcpy(q->blocks, bt, sizeof(uint32_t) * n);
    q->n_blocks = (uint32_t)n;
}

static uint32_t fw_token(struct wseq *q)
{
    uint32_t t = rnd(40) == 0 ? EOS : rnd(VOCAB - 1);
    q->n_gen++;
    for (uint32_t i = 0; i < q->n_stop; i++)
        if (q->stop[i] == t)
            q->stopped = true;
    if (q->n_gen >= q->max_new)
        q->stopped = true;
    return t;
}

/* Execute the oldest queued plan and report it (one StepResult, done). */
static void fw_run_plan(struct sched *s, struct fworker *w, uint64_t now)
{
    Tern__Envelope *env = w->plans[0];
    memmove(w->plans, w->plans + 1, sizeof *w->plans * (w->n_plans - 1));
    w->n_plans--;
    const Tern__StepPlan *p = env->step_plan;
    CONTRACT(p->step_id == w->last_step + 1, "step %" PRIu64 " after %" PRIu64, p->step_id,
             w->last_step);
    w->last_step = p->step_id;
    for (size_t i = 0; i < p->n_free_req_ids; i++) {
        int32_t k = fw_find(w, p->free_req_ids[i]);
        CONTRACT(k >= 0, "free of unknown req=%" PRIx64, p->free_req_ids[i]);
        if (k >= 0)
            fw_drop(w, k);
    }
    Tern__SeqResult *res = xcalloc(p->n_seqs ? p->n_seqs : 1, sizeof *res);
    Tern__SeqResult **resp = xcalloc(p->n_seqs ? p->n_seqs : 1, sizeof *resp);
    uint32_t *toks = xcalloc(p->n_seqs * 256 + 1, sizeof *toks);
    size_t n_res = 0;
    uint32_t step_tokens = 0;
    bool seen_prefill = false;
    for (size_t i = 0; i < p->n_seqs; i++) {
        const Tern__SeqWork *x = p->seqs[i];
        CONTRACT(!(seen_prefill && !x->n_chunk_ids), "decode after a prefill chunk: decodes first");
        seen_prefill |= x->n_chunk_ids > 0;
        int32_t k = fw_find(w, x->req_id);
        if (x->new_seq) {
            CONTRACT(k < 0, "new_seq for live req=%" PRIx64, x->req_id);
            CONTRACT(x->slot < w->slots && w->slot_owner[x->slot] == -1,
                     "slot %u not free for req=%" PRIx64, x->slot, x->req_id);
            CONTRACT(x->n_block_table > 0, "new_seq without a block table");
            /* states in the pool: an aligned chunk of free blocks, named with new_seq */
            bool state_ok = !w->state_blocks
                                ? !x->has_state_block
                                : x->has_state_block && x->state_block % w->state_blocks == 0 &&
                                      x->state_block + w->state_blocks <= w->kv_blocks;
            CONTRACT(state_ok, "state block %u bad for req=%" PRIx64, x->state_block, x->req_id);
            for (uint32_t b = 0; state_ok && w->state_blocks && b < w->state_blocks; b++)
                CONTRACT(w->block_owner[x->state_block + b] == -1,
                         "state block %u handed to req=%" PRIx64 " while held", x->state_block + b,
                         x->req_id);
            if (k >= 0 || x->slot >= w->slots || w->slot_owner[x->slot] != -1 || !state_ok)
                continue;
            k = (int32_t)w->n_seqs++;
            w->seqs = xrealloc(w->seqs, sizeof *w->seqs * w->n_seqs);
            struct wseq *q = &w->seqs[k];
            memset(q, 0, sizeof *q);
            q->id = x->req_id;
            q->slot = x->slot;
            q->state_block = w->state_blocks ? x->state_block : UINT32_MAX;
            n_pool_states += w->state_blocks > 0;
            for (uint32_t b = 0; b < w->state_blocks; b++)
                w->block_owner[x->state_block + b] = k;
            q->max_new = x->max_new;
            q->n_stop = x->n_stop_ids < 8 ? (uint32_t)x->n_stop_ids : 8;
            if (q->n_stop)
                memcpy(q->stop, x->stop_ids, sizeof(uint32_t) * q->n_stop);
            w->slot_owner[x->slot] = k;
        }
        CONTRACT(k >= 0, "work for unknown req=%" PRIx64, x->req_id);
        if (k < 0)
            continue;
        struct wseq *q = &w->seqs[k];
        CONTRACT(q->slot == x->slot, "slot changed req=%" PRIx64, x->req_id);
        if (x->n_block_table)
            fw_table(w, k, x->block_table, x->n_block_table);
        uint32_t cap = q->n_blocks * BLOCK_TOKENS;
        Tern__SeqResult *r = &res[n_res];
        tern__seq_result__init(r);
        r->has_req_id = r->has_stopped = true;
        r->req_id = x->req_id;
        r->token_ids = toks + n_res * 256;
        if (x->n_chunk_ids) {
            CONTRACT(x->pos == q->pos, "prefill at %u, expected %u", x->pos, q->pos);
            CONTRACT(x->pos + x->n_chunk_ids <= cap, "prefill past the block table: %u > %u",
                     (uint32_t)(x->pos + x->n_chunk_ids), cap);
            for (size_t j = 0; j < x->n_chunk_ids; j++)
                CONTRACT(x->chunk_ids[j] < VOCAB, "token out of vocabulary");
            q->pos += (uint32_t)x->n_chunk_ids;
            step_tokens += (uint32_t)x->n_chunk_ids;
            if (x->sample)
                r->token_ids[r->n_token_ids++] = fw_token(q);
        } else {
            CONTRACT(x->decode_steps >= 1 && x->decode_steps <= 256, "decode_steps %u",
                     x->decode_steps);
            step_tokens++;
            if (q->stopped)
                continue; /* granted ahead, sequence stopped meanwhile */
            CONTRACT(x->pos == q->pos, "decode at %u, expected %u req=%" PRIx64, x->pos, q->pos,
                     x->req_id);
            for (uint32_t j = 0; j < x->decode_steps && j < 256 && !q->stopped; j++) {
                CONTRACT(q->pos < cap, "decode writes past the block table: %u >= %u", q->pos, cap);
                q->pos++;
                r->token_ids[r->n_token_ids++] = fw_token(q);
            }
        }
        r->stopped = q->stopped;
        resp[n_res] = r;
        n_res++;
    }
    CONTRACT(step_tokens <= w->max_step, "step carries %u tokens > %u", step_tokens, w->max_step);
    Tern__Envelope out;
    Tern__StepResult sr = TERN__STEP_RESULT__INIT;
    tern__envelope__init(&out);
    out.protocol_version = MSG_PROTOCOL_VERSION;
    sr.has_step_id = sr.has_done = true;
    sr.step_id = p->step_id;
    sr.done = true;
    sr.n_seqs = n_res;
    sr.seqs = resp;
    out.body_case = TERN__ENVELOPE__BODY_STEP_RESULT;
    out.step_result = &sr;
    sched_wk_handle(s, &w->peer, &out, now);
    free(toks);
    free(resp);
    free(res);
    tern__envelope__free_unpacked(env, NULL);
}

// ---- fake gateways and the requests' ledger ----

struct greq {
    int gw;           // gateway index, -1 unused
    int gw_inc;       // its incarnation at submit
    uint32_t n_tok;   // tokens received
    uint32_t max_tok; // 0 = none
    int n_term;       // terminal messages (Finish / Error) received
    bool dropped;     // ended with its gateway
};

struct fgw {
    int incarnation;
    struct msg_peer peer;
    bool silent;
    bool gone; // the scheduler has dropped it; reconnects at back_at
    uint64_t back_at;
    int n_reset; // Resets received in this incarnation (the scheduler gave it up)
};

static struct fgw G[N_GWS];
static struct greq *R;
static uint64_t n_req_ids;
static uint64_t n_finish, n_error, n_abort_sent, n_dropped, n_worker_deaths, n_replaced,
    n_gw_disconnects;

static int gw_of_peer(const struct msg_peer *p)
{
    for (int i = 0; i < N_GWS; i++)
        if (msg_peer_equal(&G[i].peer, p))
            return i;
    return -1;
}

static void gw_start(struct fgw *g, int idx)
{
    g->incarnation++;
    char name[32];
    snprintf(name, sizeof name, "gw%d-%d", idx, g->incarnation);
    g->peer = sim_peer(name);
    g->silent = g->gone = false;
    g->n_reset = 0;
}

static void gw_receive(const struct sim_frame *f)
{
    const Tern__Envelope *e = f->env;
    int gi = gw_of_peer(&f->to);
    if (gi < 0)
        return; /* to an old incarnation: the connection is gone */
    uint64_t id = e->req_id;
    struct greq *q = id && id <= n_req_ids ? &R[id] : NULL;
    switch (e->body_case) {
    case TERN__ENVELOPE__BODY_TOKEN_EVENT:
        CHECK(q && q->n_term == 0 && !q->dropped);
        if (!q)
            return;
        CHECK_EQ_INT(e->token_event->index, q->n_tok);
        q->n_tok += (uint32_t)e->token_event->n_token_ids;
        if (q->max_tok)
            CHECK(q->n_tok <= q->max_tok);
        break;
    case TERN__ENVELOPE__BODY_FINISH:
    case TERN__ENVELOPE__BODY_ERROR:
        CHECK(q != NULL); /* no request-less errors expected */
        if (!q)
            return;
        CHECK(!q->dropped);
        q->n_term++;
        CHECK_EQ_INT(q->n_term, 1);
        if (e->body_case == TERN__ENVELOPE__BODY_FINISH) {
            n_finish++;
            CHECK(e->finish->usage && e->finish->usage->completion_tokens == q->n_tok);
            if (e->finish->reason == TERN__FINISH_REASON__FINISH_REASON_LENGTH && q->max_tok)
                CHECK(q->n_tok == q->max_tok || q->n_tok > 0);
        } else {
            n_error++;
        }
        break;
    case TERN__ENVELOPE__BODY_RESET:
        /* only to a gateway given up for its silence, so that one only stalled resubmits */
        CHECK(G[gi].silent);
        G[gi].n_reset++;
        break;
    default:
        break; /* heartbeats, acks */
    }
}

static void deliver(struct sched *s, struct sim_outbox *o)
{
    (void)s;
    struct sim_frame f;
    while (sim_outbox_pop(o, &f)) {
        bool kept = false;
        if (f.to_worker) {
            for (int i = 0; i < N_WORKERS; i++) {
                struct fworker *w = &W[i];
                if (w->state != FW_UP || !msg_peer_equal(&w->peer, &f.to))
                    continue;
                if (f.env->body_case == TERN__ENVELOPE__BODY_STEP_PLAN) {
                    if (w->n_plans == w->cap_plans) {
                        w->cap_plans = w->cap_plans ? 2 * w->cap_plans : 8;
                        w->plans = xrealloc(w->plans, sizeof *w->plans * w->cap_plans);
                    }
                    w->plans[w->n_plans++] = f.env;
                    kept = true;
                }
                CHECK(f.env->body_case != TERN__ENVELOPE__BODY_RESET);
                CHECK(f.env->body_case != TERN__ENVELOPE__BODY_ERROR);
            }
        } else {
            gw_receive(&f);
        }
        if (!kept)
            tern__envelope__free_unpacked(f.env, NULL);
    }
}

// ---- invariants ----

static void check_invariants(struct sched *s)
{
    uint32_t n = sched_reqs_count(s->reqs);
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *w = &s->workers[i];
        if (w->state != SCHED_WORKER_STATE_READY) {
            CHECK(w->pool == NULL);
            continue;
        }
        CHECK_EQ_INT(sched_pool_check(w->pool), 0);
        uint32_t nb = sched_pool_blocks_total(w->pool), ns = sched_pool_slots_total(w->pool);
        uint8_t *bo = xcalloc(nb, 1), *so = xcalloc(ns, 1);
        uint32_t held_b = 0, held_s = 0, running = 0;
        for (uint32_t k = 0; k < n; k++) {
            struct sched_req *r = sched_reqs_at(s->reqs, k);
            if (r->worker != i)
                continue;
            running++;
            CHECK(r->seq.slot >= 0 && (uint32_t)r->seq.slot < ns);
            if (r->seq.slot >= 0 && (uint32_t)r->seq.slot < ns) {
                CHECK(!so[r->seq.slot]); /* a slot owned twice */
                so[r->seq.slot] = 1;
                held_s++;
            }
            for (uint32_t b = 0; b < r->seq.n_blocks; b++) {
                uint32_t id = r->seq.blocks[b];
                CHECK(id < nb && !bo[id]); /* a block owned twice */
                if (id < nb)
                    bo[id] = 1;
                held_b++;
            }
            uint32_t sb = sched_pool_state_blocks(w->pool);
            CHECK_EQ_INT(r->seq.state_block != SCHED_POOL_NO_STATE, sb > 0);
            for (uint32_t b = 0; sb && r->seq.state_block != SCHED_POOL_NO_STATE && b < sb; b++) {
                uint32_t id = r->seq.state_block + b;
                CHECK(id < nb && !bo[id]); /* a state block also held as KV or by another */
                if (id < nb)
                    bo[id] = 1;
                held_b++;
            }
            /* the blocks cover the KV the worker may write: prefill sent + decodes granted */
            uint32_t need = r->state == SCHED_REQ_STATE_DECODE
                                ? r->n_prompt + r->n_generated + r->n_granted - 1
                                : r->n_prefilled;
            CHECK(r->seq.n_blocks * BLOCK_TOKENS >= need);
        }
        CHECK_EQ_INT(held_b, sched_pool_blocks_used(w->pool)); /* none leaked */
        CHECK_EQ_INT(held_s, sched_pool_slots_used(w->pool));
        CHECK_EQ_INT(running, w->n_running);
        free(bo);
        free(so);
    }
    uint32_t queued = 0;
    for (uint32_t k = 0; k < n; k++) {
        struct sched_req *r = sched_reqs_at(s->reqs, k);
        CHECK(r->id <= n_req_ids && R[r->id].n_term == 0 && !R[r->id].dropped);
        if (r->worker < 0) {
            CHECK(r->seq.n_blocks == 0 && r->seq.slot == -1 &&
                  r->seq.state_block == SCHED_POOL_NO_STATE); /* queued holds nothing */
            CHECK(r->queued);
            queued++;
        }
    }
    CHECK_EQ_INT(queued, s->n_queued);
}

static bool sched_has_gw(const struct sched *s, const struct msg_peer *p)
{
    for (int i = 0; i < SCHED_MAX_GATEWAYS; i++)
        if (s->gws[i].used && msg_peer_equal(&s->gws[i].peer, p))
            return true;
    return false;
}

static bool sched_has_worker(const struct sched *s, const struct msg_peer *p)
{
    for (int i = 0; i < SCHED_MAX_WORKERS; i++)
        if (s->workers[i].state != SCHED_WORKER_STATE_FREE &&
            msg_peer_equal(&s->workers[i].peer, p))
            return true;
    return false;
}

static uint64_t total_dropped; /* requests ended with their gateway, over all seeds */

static void run_sim(uint64_t seed, uint32_t n_reqs)
{
    rng_state = 0x243f6a8885a308d3ull ^ (seed * 0x9e3779b97f4a7c15ull);
    memset(W, 0, sizeof W);
    memset(G, 0, sizeof G);
    n_req_ids = n_finish = n_error = n_abort_sent = n_dropped = n_worker_deaths = n_replaced =
        n_gw_disconnects = 0;
    n_contract_errors = 0;
    n_pool_states = 0;
    struct sched_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.heartbeat_ms = 10;
    cfg.dead_after_ms = 40;
    cfg.queue_cap = 96;
    cfg.queue_timeout_ms = 20000;
    cfg.max_step_tokens = 192;
    cfg.decode_steps = 4;
    cfg.retry_after_ms = 100;
    cfg.check_pool = true;
    struct sim_outbox box;
    memset(&box, 0, sizeof box);
    struct sched_transport t = {.send = sim_outbox_send, .ctx = &box};
    struct sched s;
    CHECK_EQ_INT(sched_init_local(&s, &cfg, &t), 0);

    static const uint32_t blocks[N_WORKERS] = {40, 120, 96}; /* 640 .. 1920 tokens */
    static const uint32_t slots[N_WORKERS] = {8, 24, 12};
    /* w2 keeps its GDN states in the pool: 3 blocks each, taken at admission */
    static const uint32_t state_blocks[N_WORKERS] = {0, 0, 3};
    for (int i = 0; i < N_WORKERS; i++) {
        struct fworker *w = &W[i];
        snprintf(w->name, sizeof w->name, "w%d", i);
        w->kv_blocks = blocks[i];
        w->state_blocks = state_blocks[i];
        w->slots = slots[i];
        w->max_seqs = slots[i] + 4; /* more than slots: the scheduler caps to slots */
        w->max_step = i == 1 ? 96 : 1024;
        w->block_owner = xmalloc(sizeof(int32_t) * w->kv_blocks);
        w->slot_owner = xmalloc(sizeof(int32_t) * w->slots);
        fw_start(&s, w, 0);
    }
    for (int i = 0; i < N_GWS; i++)
        gw_start(&G[i], i);
    R = xcalloc(n_reqs + 1, sizeof *R);
    uint32_t *prompt = xmalloc(sizeof(uint32_t) * MAX_LEN);

    uint64_t now = 1;
    uint64_t tick;
    for (tick = 0; tick < MAX_TICKS; tick++, now++) {
        /* new requests: a burst now and then */
        uint32_t burst = rnd(8) == 0 ? rnd(12) : rnd(2);
        for (uint32_t b = 0; b < burst && n_req_ids < n_reqs; b++) {
            int gi = (int)rnd(N_GWS);
            if (G[gi].silent)
                continue;
            uint32_t kind = rnd(100);
            uint32_t len = kind < 70 ? 1 + rnd(64) : kind < 95 ? 64 + rnd(240) : 300 + rnd(MAX_LEN);
            for (uint32_t j = 0; j < len && j < MAX_LEN; j++)
                prompt[j] = rnd(VOCAB - 1);
            uint32_t max_tok = rnd(10) == 0 ? 0 : 1 + rnd(128);
            uint64_t id = ++n_req_ids;
            R[id] = (struct greq){.gw = gi, .gw_inc = G[gi].incarnation, .max_tok = max_tok};
            sim_submit(&s, &G[gi].peer, id, prompt, len < MAX_LEN ? len : MAX_LEN, max_tok,
                       rnd(4) == 0, now);
        }
        /* aborts */
        if (n_req_ids && rnd(4) == 0) {
            uint32_t span = n_req_ids < 64 ? (uint32_t)n_req_ids : 64;
            uint64_t id = n_req_ids - rnd(span);
            struct greq *q = &R[id];
            if (q->n_term == 0 && !q->dropped && !G[q->gw].silent &&
                q->gw_inc == G[q->gw].incarnation) {
                sim_abort(&s, &G[q->gw].peer, id, now);
                n_abort_sent++;
            }
        }
        /* a gateway goes silent (disconnect) now and then, and comes back later */
        for (int gi = 0; gi < N_GWS; gi++) {
            struct fgw *g = &G[gi];
            bool force = tick == 700 + 100 * (uint64_t)gi && n_gw_disconnects == 0;
            if (!g->silent && !g->gone && n_req_ids < n_reqs && (force || rnd(2000) == 0)) {
                g->silent = true;
                n_gw_disconnects++;
            } else if (g->silent && !g->gone && !sched_has_gw(&s, &g->peer)) {
                /* dropped with its gateway: those requests end without a message, and the
                 * gateway was told (a Reset), in case it was alive after all */
                CHECK_EQ_INT(g->n_reset, 1);
                for (uint64_t id = 1; id <= n_req_ids; id++)
                    if (R[id].gw == gi && R[id].gw_inc == g->incarnation && R[id].n_term == 0) {
                        CHECK(sched_reqs_find(s.reqs, id) == NULL);
                        R[id].dropped = true;
                        n_dropped++;
                    }
                g->gone = true;
                g->back_at = tick + 20 + rnd(100);
            } else if (g->gone && tick >= g->back_at) {
                gw_start(g, gi);
            }
            if (!g->silent)
                sim_heartbeat(&s, &g->peer, false, now);
        }
        /* workers: die (go silent), come back, restart under the same name */
        for (int i = 0; i < N_WORKERS; i++) {
            struct fworker *w = &W[i];
            bool force = tick == 900 && n_worker_deaths == 0;
            if (w->state == FW_UP && n_req_ids < n_reqs && (force || rnd(1500) == 0)) {
                w->state = FW_SILENT;
                n_worker_deaths++;
            } else if (w->state == FW_UP && n_req_ids < n_reqs && rnd(4000) == 0) {
                fw_start(&s, w, now); /* restarted before the scheduler noticed: replaced */
                n_replaced++;
            } else if (w->state == FW_SILENT && !sched_has_worker(&s, &w->peer)) {
                w->state = FW_DOWN;
                w->back_at = tick + 10 + rnd(200);
            } else if (w->state == FW_DOWN && tick >= w->back_at) {
                fw_start(&s, w, now);
            }
            if (w->state == FW_UP) {
                if (w->n_plans && rnd(8) != 0) /* sometimes a slow step */
                    fw_run_plan(&s, w, now);
                sim_heartbeat(&s, &w->peer, true, now);
            }
        }
        deliver(&s, &box);
        sched_turn(&s, now);
        deliver(&s, &box);
        check_invariants(&s);
        if (test_failures_ || n_contract_errors)
            break;
        bool all_done = n_req_ids == n_reqs;
        for (uint64_t id = 1; all_done && id <= n_req_ids; id++)
            all_done = R[id].n_term == 1 || R[id].dropped;
        if (all_done && sched_reqs_count(s.reqs) == 0)
            break;
    }
    /* let the last frees reach the workers */
    for (int k = 0; k < 10; k++, now++) {
        for (int i = 0; i < N_WORKERS; i++)
            while (W[i].state == FW_UP && W[i].n_plans)
                fw_run_plan(&s, &W[i], now);
        sched_turn(&s, now);
        deliver(&s, &box);
    }
    for (int i = 0; i < N_WORKERS; i++)
        while (W[i].state == FW_UP && W[i].n_plans)
            fw_run_plan(&s, &W[i], now);
    check_invariants(&s);

    CHECK(tick < MAX_TICKS);
    CHECK_EQ_INT(n_contract_errors, 0);
    CHECK_EQ_INT(n_req_ids, n_reqs);
    uint64_t ended = 0;
    for (uint64_t id = 1; id <= n_req_ids; id++) {
        CHECK(R[id].n_term + (R[id].dropped ? 1 : 0) == 1); /* finished or failed exactly once */
        ended += R[id].n_term + (R[id].dropped ? 1 : 0);
    }
    CHECK_EQ_INT(ended, n_reqs);
    CHECK_EQ_INT(sched_reqs_count(s.reqs), 0);
    CHECK_EQ_INT(s.n_queued, 0);
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *w = &s.workers[i];
        if (w->state != SCHED_WORKER_STATE_READY)
            continue;
        CHECK_EQ_INT(sched_pool_blocks_used(w->pool), 0); /* usage back to zero */
        CHECK_EQ_INT(sched_pool_slots_used(w->pool), 0);
        CHECK_EQ_INT(w->n_running, 0);
    }
    for (int i = 0; i < N_WORKERS; i++)
        if (W[i].state == FW_UP)
            CHECK_EQ_INT(W[i].n_seqs, 0); /* every sequence was freed at the worker too */
    /* the run exercised what it claims to */
    CHECK(s.n_preempted > 0);
    CHECK(n_abort_sent > 0 && s.n_aborted > 0);
    CHECK(n_worker_deaths > 0);
    CHECK(n_gw_disconnects > 0);
    CHECK(n_pool_states > 0);
    total_dropped += n_dropped;
    printf("sim: seed=%" PRIu64 " requests=%u ticks=%" PRIu64 " finished=%" PRIu64
           " errors=%" PRIu64 " dropped_with_gateway=%" PRIu64 " aborts_sent=%" PRIu64
           " sched_aborted=%" PRIu64 " preempted=%" PRIu64 " rejected=%" PRIu64
           " worker_deaths=%" PRIu64 " worker_replaced=%" PRIu64 " gw_disconnects=%" PRIu64
           " gen_tokens=%" PRIu64 " states_in_pool=%" PRIu64 "\n",
           seed, n_reqs, tick, n_finish, n_error, n_dropped, n_abort_sent, s.n_aborted,
           s.n_preempted, s.n_rejected, n_worker_deaths, n_replaced, n_gw_disconnects,
           s.generation_tokens_total, n_pool_states);

    sched_deinit(&s);
    sim_outbox_destroy(&box);
    for (int i = 0; i < N_WORKERS; i++) {
        fw_reset_state(&W[i]);
        free(W[i].seqs);
        free(W[i].plans);
        free(W[i].block_owner);
        free(W[i].slot_owner);
    }
    free(prompt);
    free(R);
    R = NULL;
}

int main(int argc, char **argv)
{
    uint32_t n_reqs = argc > 1 ? (uint32_t)atoi(argv[1]) : 4000;
    uint32_t n_seeds = argc > 2 ? (uint32_t)atoi(argv[2]) : 8;
    log_init("sim", LOG_LEVEL_OFF);
    for (uint32_t seed = 1; seed <= n_seeds && !test_failures_; seed++)
        run_sim(seed, n_reqs);
    CHECK(total_dropped > 0);
    return test_result();
}
