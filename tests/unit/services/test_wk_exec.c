/* Unit: the worker's exec thread (wk_exec) with the fake engine, driven through its inproc pipe
 * like the link thread does. The plan is trusted for ownership, never for bounds: bad slots,
 * block ids, positions, capacities, unknown sequences each fail alone; valid work gives the fake
 * model's tokens; multi-step decode reports every step; stop ids and max_new stop a sequence and
 * later (pipelined) decodes for it are skipped; frees and Reset drop sequences. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/msg.h"
#include "proto/tern.pb-c.h"
#include "test.h"
#include "wk.h"

#define V 100

static struct msg_sock pipe_s;
static uint64_t step;

struct res {
    uint64_t req;
    uint32_t toks[32];
    uint32_t n;
    bool err, stopped;
};

struct out {
    struct res r[8];
    int n_res;
    int n_results; /* StepResult frames for the plan */
    bool done;
};

static uint32_t nxt(uint32_t p)
{
    return (p * 31 + 7) % V;
}

static struct res *res_of(struct out *o, uint64_t req)
{
    for (int i = 0; i < o->n_res; i++)
        if (o->r[i].req == req)
            return &o->r[i];
    struct res *r = &o->r[o->n_res++];
    memset(r, 0, sizeof *r);
    r->req = req;
    return r;
}

static Tern__Envelope *recv_env(int timeout_ms)
{
    for (int t = 0; t < timeout_ms / 10; t++) {
        ProtobufCMessage *m;
        if (msg_recv(&pipe_s, NULL, &m) == 0)
            return (Tern__Envelope *)m;
        msg_sock_wait(&pipe_s, 10);
    }
    return NULL;
}

static void env_init(Tern__Envelope *e)
{
    tern__envelope__init(e);
    e->protocol_version = MSG_PROTOCOL_VERSION;
}

/* Send one plan (items, frees) and collect its results until done. */
static struct out run(Tern__SeqWork **items, size_t n, uint64_t *frees, size_t n_frees)
{
    struct out o;
    memset(&o, 0, sizeof o);
    Tern__Envelope e;
    Tern__StepPlan p = TERN__STEP_PLAN__INIT;
    env_init(&e);
    p.has_step_id = true;
    p.step_id = ++step;
    p.n_seqs = n;
    p.seqs = items;
    p.n_free_req_ids = n_frees;
    p.free_req_ids = frees;
    e.body_case = TERN__ENVELOPE__BODY_STEP_PLAN;
    e.step_plan = &p;
    CHECK_EQ_INT(msg_send(&pipe_s, NULL, &e.base), 0);
    while (!o.done) {
        Tern__Envelope *r = recv_env(3000);
        CHECK(r != NULL);
        if (!r)
            break;
        CHECK(r->body_case == TERN__ENVELOPE__BODY_STEP_RESULT);
        if (r->body_case == TERN__ENVELOPE__BODY_STEP_RESULT) {
            const Tern__StepResult *sr = r->step_result;
            CHECK(sr->step_id == p.step_id);
            o.n_results++;
            o.done = sr->done;
            for (size_t i = 0; i < sr->n_seqs; i++) {
                struct res *x = res_of(&o, sr->seqs[i]->req_id);
                for (size_t k = 0; k < sr->seqs[i]->n_token_ids && x->n < 32; k++)
                    x->toks[x->n++] = sr->seqs[i]->token_ids[k];
                x->err |= sr->seqs[i]->has_error && sr->seqs[i]->error != 0;
                x->stopped |= sr->seqs[i]->stopped;
            }
        }
        msg_free(&r->base);
    }
    return o;
}

static Tern__SeqWork prefill(uint64_t req, uint32_t slot, uint32_t *blocks, size_t nb, uint32_t pos,
                             uint32_t *ids, size_t n, bool is_new, bool sample)
{
    Tern__SeqWork w = TERN__SEQ_WORK__INIT;
    w.has_req_id = w.has_slot = w.has_pos = w.has_new_seq = w.has_sample = true;
    w.req_id = req;
    w.slot = slot;
    w.block_table = blocks;
    w.n_block_table = nb;
    w.pos = pos;
    w.chunk_ids = ids;
    w.n_chunk_ids = n;
    w.new_seq = is_new;
    w.sample = sample;
    return w;
}

static Tern__SeqWork decode(uint64_t req, uint32_t slot, uint32_t pos, uint32_t steps)
{
    Tern__SeqWork w = TERN__SEQ_WORK__INIT;
    w.has_req_id = w.has_slot = w.has_pos = w.has_decode_steps = true;
    w.req_id = req;
    w.slot = slot;
    w.pos = pos;
    w.decode_steps = steps;
    return w;
}

static struct out run1(Tern__SeqWork w)
{
    Tern__SeqWork *p = &w;
    return run(&p, 1, NULL, 0);
}

static void test_valid_and_bounds(void)
{
    uint32_t b01[2] = {0, 1}, b012[3] = {0, 1, 2}, ids[3] = {5, 6, 7};
    /* a prompt, sampled: the fake model's next token */
    struct out o = run1(prefill(1, 0, b01, 2, 0, ids, 3, true, true));
    struct res *r = res_of(&o, 1);
    CHECK(o.done && !r->err && r->n == 1 && r->toks[0] == nxt(7));
    /* 3 decode steps back to back: 3 result frames, done on the last */
    o = run1(decode(1, 0, 3, 3));
    r = res_of(&o, 1);
    CHECK_EQ_INT(o.n_results, 3);
    CHECK(!r->err && r->n == 3);
    CHECK(r->toks[0] == nxt(nxt(7)) && r->toks[1] == nxt(r->toks[0]) &&
          r->toks[2] == nxt(r->toks[1]));
    uint32_t last = r->toks[2];
    /* 6 tokens in KV, blocks hold 8: 3 more steps do not fit */
    o = run1(decode(1, 0, 6, 3));
    CHECK(res_of(&o, 1)->err && res_of(&o, 1)->n == 0);
    /* with a third block they do (the refused item changed nothing) */
    Tern__SeqWork w = decode(1, 0, 6, 2);
    w.block_table = b012;
    w.n_block_table = 3;
    o = run1(w);
    r = res_of(&o, 1);
    CHECK(!r->err && r->n == 2 && r->toks[0] == nxt(last) && r->toks[1] == nxt(nxt(last)));
    /* wrong position, unknown sequence, slot out of range, block id out of range */
    o = run1(decode(1, 0, 3, 1));
    CHECK(res_of(&o, 1)->err);
    o = run1(decode(99, 0, 0, 1));
    CHECK(res_of(&o, 99)->err);
    o = run1(prefill(2, 4, b01, 2, 0, ids, 3, true, true)); /* --max-seqs 4 */
    CHECK(res_of(&o, 2)->err);
    uint32_t bad[2] = {3, 16}; /* --kv-blocks 16 */
    o = run1(prefill(3, 1, bad, 2, 0, ids, 3, true, true));
    CHECK(res_of(&o, 3)->err);
    /* a chunk longer than its blocks, and one longer than max-step-tokens */
    uint32_t one[1] = {5}, big[40];
    for (int i = 0; i < 40; i++)
        big[i] = (uint32_t)i;
    o = run1(prefill(4, 1, one, 1, 0, ids, 3, true, false));
    CHECK(!res_of(&o, 4)->err); /* 3 tokens in a 4-token block */
    o = run1(prefill(4, 1, NULL, 0, 3, ids, 3, false, false));
    CHECK(res_of(&o, 4)->err); /* 6 > 4 */
    uint32_t many[10] = {4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    o = run1(prefill(5, 2, many, 10, 0, big, 40, true, true)); /* --max-step-tokens 32 */
    CHECK(res_of(&o, 5)->err);
    /* decode before any sampled token */
    o = run1(decode(4, 1, 3, 1));
    CHECK(res_of(&o, 4)->err);
    /* the first sequence is untouched by all of that */
    o = run1(decode(1, 0, 8, 1));
    r = res_of(&o, 1);
    CHECK(!r->err && r->n == 1 && r->toks[0] == nxt(nxt(nxt(last))));
}

static void test_batch_stop_free(void)
{
    uint32_t ba[2] = {8, 9}, bb[2] = {10, 11}, pa[1] = {24}, pb[2] = {1, 2};
    /* two new sequences in one step */
    Tern__SeqWork wa = prefill(10, 2, ba, 2, 0, pa, 1, true, true);
    Tern__SeqWork wb = prefill(11, 3, bb, 2, 0, pb, 2, true, true);
    uint32_t stop[1] = {nxt(nxt(24))}; /* the second token of sequence 10 */
    wa.n_stop_ids = 1;
    wa.stop_ids = stop;
    wa.has_max_new = true;
    wa.max_new = 10;
    wb.has_max_new = true;
    wb.max_new = 2; /* sequence 11: two tokens in all */
    Tern__SeqWork *items[2] = {&wa, &wb};
    struct out o = run(items, 2, NULL, 0);
    CHECK(res_of(&o, 10)->n == 1 && res_of(&o, 10)->toks[0] == nxt(24));
    CHECK(res_of(&o, 11)->n == 1 && res_of(&o, 11)->toks[0] == nxt(2));
    /* decode 5 steps each: 10 stops on its stop id, 11 on max_new, after one token each */
    Tern__SeqWork da = decode(10, 2, 1, 5), db = decode(11, 3, 2, 5);
    items[0] = &da;
    items[1] = &db;
    o = run(items, 2, NULL, 0);
    struct res *ra = res_of(&o, 10), *rb = res_of(&o, 11);
    CHECK(!ra->err && ra->n == 1 && ra->toks[0] == stop[0] && ra->stopped);
    CHECK(!rb->err && rb->n == 1 && rb->toks[0] == nxt(nxt(2)) && rb->stopped);
    CHECK_EQ_INT(o.n_results, 1);
    /* a decode granted ahead of time (pipelined) to a stopped sequence: skipped, no error */
    Tern__SeqWork da2 = decode(10, 2, 6, 5);
    items[0] = &da2;
    o = run(items, 1, NULL, 0);
    CHECK(o.done && o.n_res == 0);
    /* frees: the sequence is gone, its slot reusable */
    uint64_t frees[2] = {10, 11};
    o = run(NULL, 0, frees, 2);
    CHECK(o.done && o.n_res == 0);
    o = run1(decode(10, 2, 2, 1));
    CHECK(res_of(&o, 10)->err);
    o = run1(prefill(12, 2, ba, 2, 0, pa, 1, true, true));
    CHECK(!res_of(&o, 12)->err && res_of(&o, 12)->toks[0] == nxt(24));
    /* new_seq on an occupied slot: the scheduler owns slots, the old holder is dropped */
    o = run1(prefill(13, 2, ba, 2, 0, pb, 2, true, true));
    CHECK(!res_of(&o, 13)->err && res_of(&o, 13)->toks[0] == nxt(2));
    o = run1(decode(12, 2, 1, 1));
    CHECK(res_of(&o, 12)->err);
}

static void test_reset(void)
{
    Tern__Envelope e;
    Tern__Reset rs = TERN__RESET__INIT;
    env_init(&e);
    e.body_case = TERN__ENVELOPE__BODY_RESET;
    e.reset = &rs;
    CHECK_EQ_INT(msg_send(&pipe_s, NULL, &e.base), 0);
    Tern__Envelope *r = recv_env(3000);
    CHECK(r && r->body_case == TERN__ENVELOPE__BODY_RESET);
    if (r)
        msg_free(&r->base);
    struct out o = run1(decode(1, 0, 9, 1)); /* sequence 1 was alive before the reset */
    CHECK(res_of(&o, 1)->err);
}

int main(void)
{
    char *argv[] = {"x",
                    "--engine",
                    "fake",
                    "--max-seqs",
                    "4",
                    "--block-tokens",
                    "4",
                    "--kv-blocks",
                    "16",
                    "--fake-vocab",
                    "100",
                    "--max-model-len",
                    "64",
                    "--max-step-tokens",
                    "32",
                    "--scheduler-endpoint",
                    "ipc:///tmp/unused.sock",
                    NULL};
    struct wk_cfg cfg;
    CHECK_EQ_INT(wk_cfg_parse(&cfg, 17, argv), 0);
    void *z = msg_context_create();
    CHECK_EQ_INT(
        msg_sock_bind(&pipe_s, z, MSG_KIND_PAIR, "inproc://wkx", &tern__envelope__descriptor, NULL),
        0);
    atomic_bool stop;
    atomic_init(&stop, false);
    struct wk_exec *x = wk_exec_create(&cfg, z, "inproc://wkx", &stop);
    CHECK(x != NULL);
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, wk_exec_main, x), 0);
    /* LoadProgress frames, then Register with the capacity */
    Tern__Envelope *e;
    bool registered = false;
    while (!registered && (e = recv_env(3000)) != NULL) {
        if (e->body_case == TERN__ENVELOPE__BODY_REGISTER_WORKER) {
            registered = true;
            CHECK_EQ_INT(e->register_worker->kv_blocks, 16);
            CHECK_EQ_INT(e->register_worker->max_seqs, 4);
            CHECK_EQ_INT(e->register_worker->vocab_size, 100);
        }
        msg_free(&e->base);
    }
    CHECK(registered);
    if (registered) {
        test_valid_and_bounds();
        test_batch_stop_free();
        test_reset();
    }
    atomic_store(&stop, true);
    pthread_join(th, NULL);
    wk_exec_destroy(x);
    msg_sock_close(&pipe_s);
    msg_context_destroy(z);
    return test_result();
}
