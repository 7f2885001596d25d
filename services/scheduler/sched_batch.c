/* sched_batch: placement (queue -> worker) and step plans (continuous batching).
 * Placement is FIFO: the head request goes to the ready worker with the most free KV blocks
 * that can hold it now; if none can, everyone behind it waits. A placed request takes a slot, its
 * GDN state (blocks of the pool when the worker keeps states there) and the blocks of its prefill;
 * each decode grant grows its blocks, and when the pool is short the youngest request on the worker
 * is preempted (its tokens so far are kept and prefilled again on its next placement).
 * --reserve-full takes prompt + max_new up front instead (no preemption). The exact hybrid
 * accounting replaces sched_pool behind the same interface. Plans per worker, up to
 * SCHED_PLANS_INFLIGHT in flight so that the next one waits at the worker while the current one
 * runs: decodes first (each granted up to decode_steps steps, run back to back by the worker,
 * positions counting the steps already granted), then prefill chunks under the step token budget,
 * oldest placement first. Frees of ended sequences ride on the next plan; a decode granted to a
 * sequence that has stopped meanwhile is skipped by the worker. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sched_internal.h"

/* Completion limit of r if placed on w. */
static uint32_t max_new_on(const struct sched_req *r, const struct sched_worker *w)
{
    uint64_t cap = w->max_model_len;
    uint64_t pool_tokens = sched_pool_seq_tokens_max(w->pool);
    if (pool_tokens < cap)
        cap = pool_tokens;
    if (r->n_prompt >= cap)
        return 0;
    uint32_t room = (uint32_t)(cap - r->n_prompt);
    return r->max_tokens && r->max_tokens < room ? r->max_tokens : room;
}

static bool vocab_ok(const struct sched_req *r, const struct sched_worker *w)
{
    for (uint32_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] >= w->vocab_size)
            return false;
    for (uint32_t i = 0; i < r->samp.n_bias; i++)
        if (r->samp.bias_ids[i] >= w->vocab_size)
            return false;
    return true;
}

/* KV tokens a placement takes now: everything up front, or just the prefill (lazy). */
static uint32_t place_tokens(const struct sched *s, const struct sched_req *r, uint32_t max_new)
{
    return s->cfg->reserve_full ? r->n_prompt + max_new : r->n_prompt + r->n_resume;
}

/* Lazy mode keeps one block of growth room per running sequence free at admission, so that a
 * new request does not immediately force a preemption. */
static bool room_now(const struct sched *s, const struct sched_worker *w, uint32_t tokens)
{
    uint32_t need = sched_pool_blocks_for(w->pool, tokens);
    if (!s->cfg->reserve_full)
        need += w->n_running;
    return sched_pool_can_fit_blocks(w->pool, need);
}

static void place(struct sched *s, struct sched_req *r, struct sched_worker *w, uint32_t max_new,
                  uint64_t now_ms)
{
    int rc = sched_pool_seq_alloc(w->pool, place_tokens(s, r, max_new), &r->seq);
    if (rc < 0)
        return; /* checked by the caller with room_now */
    sched_queue_remove(s, r);
    r->worker = sched_wk_index(s, w);
    r->state = SCHED_REQ_STATE_PREFILL;
    r->max_new = max_new;
    r->n_prefilled = 0;
    r->n_blocks_sent = 0;
    r->fence_worker = -1;
    r->t_placed_ms = now_ms;
    if (!r->ignore_eos && w->n_eos) {
        r->stop_ids = xrealloc(r->stop_ids, sizeof(uint32_t) * (r->n_stop_user + w->n_eos));
        memcpy(r->stop_ids + r->n_stop_user, w->eos_ids, sizeof(uint32_t) * w->n_eos);
        r->n_stop = r->n_stop_user + w->n_eos;
    }
    w->n_running++;
    if (r->n_resume == 0)
        s->prompt_tokens_total += r->n_prompt;
    sched_check_pools(s);
    LOG_INFO("req_placed",
             "req=%016" PRIx64 " worker=%s prompt=%u resumed=%u max_new=%u "
             "blocks=%u slot=%d state_block=%d wait_ms=%" PRIu64,
             r->id, w->id, r->n_prompt, r->n_resume, max_new, r->seq.n_blocks, (int)r->seq.slot,
             r->seq.state_block == SCHED_POOL_NO_STATE ? -1 : (int)r->seq.state_block,
             now_ms - r->t_submit_ms);
}

void sched_batch_place(struct sched *s, uint64_t now_ms)
{
    while (s->q_head) {
        struct sched_req *r = s->q_head;
        struct sched_worker *best = NULL;
        uint32_t best_new = 0;
        bool could_ever = false, loading = false;
        for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
            struct sched_worker *w = &s->workers[i];
            if (w->state == SCHED_WORKER_STATE_LOADING)
                loading = true;
            if (w->state != SCHED_WORKER_STATE_READY)
                continue;
            uint32_t max_new = max_new_on(r, w);
            if (max_new == 0 || !vocab_ok(r, w) ||
                !sched_pool_can_ever_fit(w->pool, r->n_prompt + max_new))
                continue;
            could_ever = true;
            if (r->fence_worker == i && w->step_done < r->fence_step)
                continue; /* its old plans there may still report */
            if (max_new <= r->n_resume || w->n_running >= w->max_seqs ||
                !room_now(s, w, place_tokens(s, r, max_new)))
                continue;
            if (!best || sched_pool_blocks_free(w->pool) > sched_pool_blocks_free(best->pool)) {
                best = w;
                best_new = max_new;
            }
        }
        if (best) {
            place(s, r, best, best_new, now_ms);
            if (r->worker < 0)
                return; /* allocation refused: keep FIFO order, try next turn */
            continue;
        }
        bool any_ready = false;
        for (int i = 0; i < SCHED_MAX_WORKERS; i++)
            any_ready |= s->workers[i].state == SCHED_WORKER_STATE_READY;
        if (any_ready && !could_ever && !loading) {
            sched_req_fail(s, r, TERN__ERROR_CODE__ERROR_CODE_TOO_LONG,
                           "prompt does not fit any worker (max_model_len, vocabulary or pool)");
            continue;
        }
        return; /* head waits for room; FIFO */
    }
}

// ---- plans ----

static int cmp_placed(const void *a, const void *b)
{
    const struct sched_req *x = *(const struct sched_req *const *)a;
    const struct sched_req *y = *(const struct sched_req *const *)b;
    if (x->t_placed_ms != y->t_placed_ms)
        return x->t_placed_ms < y->t_placed_ms ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : 0;
}

/* done: completion tokens this placement starts with (resumed), which count for min_tokens and
 * which the worker's grammar replays */
static void fill_sampling(Tern__SamplingParams *p, const struct sched_sampling *x, uint32_t done)
{
    tern__sampling_params__init(p);
    p->has_temperature = p->has_top_p = p->has_top_k = p->has_min_p = true;
    p->has_presence_penalty = p->has_frequency_penalty = p->has_repetition_penalty = true;
    p->has_seed = p->has_logprobs = p->has_top_logprobs = true;
    p->temperature = x->temperature;
    p->top_p = x->top_p;
    p->top_k = x->top_k;
    p->min_p = x->min_p;
    p->presence_penalty = x->presence_penalty;
    p->frequency_penalty = x->frequency_penalty;
    p->repetition_penalty = x->repetition_penalty;
    p->seed = x->seed;
    p->logprobs = x->logprobs;
    p->top_logprobs = x->top_logprobs;
    p->has_min_tokens = x->min_tokens > done;
    p->min_tokens = x->min_tokens > done ? x->min_tokens - done : 0;
    p->n_bias_ids = p->n_bias_values = x->n_bias;
    p->bias_ids = x->bias_ids;
    p->bias_values = x->bias_vals;
    if (x->json_schema) {
        p->json_schema = x->json_schema;
        p->has_json_replay = true;
        p->json_replay = x->json_replay + done;
    }
}

/* Make room in r's block table for `steps` decode steps; returns the steps granted (maybe
 * fewer, 0 when r itself had to be preempted). mine: w's requests, oldest first. */
static uint32_t grow_for_decode(struct sched *s, struct sched_worker *w, struct sched_req *r,
                                uint32_t steps, struct sched_req **mine, uint32_t n_mine)
{
    int idx = sched_wk_index(s, w);
    uint32_t base = r->n_prompt + r->n_generated + r->n_granted - 1; /* KV filled before */
    for (;;) {
        if (sched_pool_seq_grow(w->pool, &r->seq, base + steps) == 0)
            return steps;
        uint32_t cap = r->seq.n_blocks * w->block_tokens;
        if (cap > base)
            return cap - base; /* what the blocks it has still hold */
        struct sched_req *victim = NULL;
        for (uint32_t k = n_mine; k-- > 0 && !victim;)
            if (mine[k]->worker == idx)
                victim = mine[k];
        sched_req_preempt(s, victim); /* the youngest; r itself at worst */
        if (victim == r)
            return 0;
    }
}

static void plan_worker(struct sched *s, struct sched_worker *w)
{
    if (w->n_running == 0 && w->n_frees == 0)
        return;
    int idx = sched_wk_index(s, w);
    uint32_t n_mine = 0;
    uint32_t n_all = sched_reqs_count(s->reqs);
    struct sched_req **mine = xmalloc(sizeof *mine * (n_all ? n_all : 1));
    for (uint32_t i = 0; i < n_all; i++) {
        struct sched_req *r = sched_reqs_at(s->reqs, i);
        if (r->worker == idx)
            mine[n_mine++] = r;
    }
    qsort(mine, n_mine, sizeof *mine, cmp_placed);

    Tern__SeqWork *work = xmalloc(sizeof *work * (n_mine ? n_mine : 1));
    Tern__SeqWork **wp = xmalloc(sizeof *wp * (n_mine ? n_mine : 1));
    Tern__SamplingParams *sp = xmalloc(sizeof *sp * (n_mine ? n_mine : 1));
    uint32_t *chunk = xcalloc(n_mine ? n_mine : 1, sizeof *chunk); /* prefill advance */
    uint32_t *grant = xcalloc(n_mine ? n_mine : 1, sizeof *grant); /* decode steps granted */
    struct sched_req **who = xmalloc(sizeof *who * (n_mine ? n_mine : 1));
    uint32_t n_work = 0;
    uint64_t budget = s->cfg->max_step_tokens;
    if (w->max_step_tokens < budget)
        budget = w->max_step_tokens;

    /* decodes first, oldest first; KV grows per grant, the youngest is preempted when short */
    for (uint32_t i = 0; i < n_mine && budget > 0; i++) {
        struct sched_req *r = mine[i];
        if (r->worker != idx || r->state != SCHED_REQ_STATE_DECODE ||
            r->n_generated + r->n_granted >= r->max_new)
            continue;
        uint32_t steps = r->max_new - r->n_generated - r->n_granted;
        /* a speculative round writes KV for spec_tokens+1 positions: grant at least that */
        uint32_t want = (uint32_t)s->cfg->decode_steps;
        if (w->spec_tokens + 1 > want)
            want = w->spec_tokens + 1;
        if (steps > want)
            steps = want;
        steps = grow_for_decode(s, w, r, steps, mine, n_mine);
        if (steps == 0)
            continue;
        Tern__SeqWork *x = &work[n_work];
        tern__seq_work__init(x);
        x->req_id = r->id;
        x->has_req_id = x->has_slot = x->has_pos = x->has_decode_steps = true;
        x->slot = (uint32_t)r->seq.slot;
        x->pos = r->n_prompt + r->n_generated + r->n_granted - 1;
        x->decode_steps = steps;
        grant[n_work] = steps;
        if (r->n_blocks_sent != r->seq.n_blocks) {
            x->n_block_table = r->seq.n_blocks;
            x->block_table = r->seq.blocks;
        }
        who[n_work] = r;
        wp[n_work] = x;
        n_work++;
        budget--;
    }
    /* then prefill chunks, oldest placement first */
    for (uint32_t i = 0; i < n_mine && budget > 0; i++) {
        struct sched_req *r = mine[i];
        uint32_t len = r->n_prompt + r->n_resume; /* this placement's prefill */
        if (r->worker != idx || r->state != SCHED_REQ_STATE_PREFILL || r->n_prefilled >= len)
            continue;
        const uint32_t *ids = r->n_resume ? r->resume_ids : r->prompt;
        uint32_t n = len - r->n_prefilled;
        if (n > budget)
            n = (uint32_t)budget;
        Tern__SeqWork *x = &work[n_work];
        tern__seq_work__init(x);
        x->has_req_id = x->has_slot = x->has_pos = x->has_new_seq = x->has_sample = true;
        x->req_id = r->id;
        x->slot = (uint32_t)r->seq.slot;
        x->pos = r->n_prefilled;
        x->n_chunk_ids = n;
        x->chunk_ids = (uint32_t *)ids + r->n_prefilled;
        x->new_seq = r->n_prefilled == 0;
        x->sample = r->n_prefilled + n == len;
        if (r->n_blocks_sent != r->seq.n_blocks) {
            x->n_block_table = r->seq.n_blocks;
            x->block_table = r->seq.blocks;
        }
        if (x->new_seq) {
            fill_sampling(&sp[n_work], &r->samp, r->n_resume);
            x->sampling = &sp[n_work];
            x->n_stop_ids = r->n_stop;
            x->stop_ids = r->stop_ids;
            x->has_max_new = true;
            x->max_new = r->max_new - r->n_resume; /* counted from this placement's start */
            if (r->seq.state_block != SCHED_POOL_NO_STATE) {
                x->has_state_block = true;
                x->state_block = r->seq.state_block;
            }
        }
        chunk[n_work] = n;
        who[n_work] = r;
        wp[n_work] = x;
        n_work++;
        budget -= n;
    }

    if (n_work || w->n_frees) {
        Tern__Envelope env;
        Tern__StepPlan plan = TERN__STEP_PLAN__INIT;
        sched_env_init(&env, 0);
        plan.has_step_id = true;
        plan.step_id = w->step_id + 1;
        plan.n_free_req_ids = w->n_frees;
        plan.free_req_ids = w->frees;
        plan.n_seqs = n_work;
        plan.seqs = wp;
        env.body_case = TERN__ENVELOPE__BODY_STEP_PLAN;
        env.step_plan = &plan;
        if (sched_send_wk(s, w, &env) == 0) { /* on failure nothing moves; next turn retries */
            w->step_id++;
            w->n_inflight++;
            w->plan_first_seen[w->step_id % SCHED_PLANS_INFLIGHT] = false;
            w->plan_sent_ns[w->step_id % SCHED_PLANS_INFLIGHT] = clock_now_ns();
            w->n_frees = 0;
            for (uint32_t i = 0; i < n_work; i++) {
                who[i]->n_prefilled += chunk[i];
                who[i]->n_granted += grant[i];
                who[i]->n_blocks_sent = who[i]->seq.n_blocks;
            }
            LOG_DEBUG("plan_sent", "worker=%s step=%" PRIu64 " seqs=%u frees=%zu", w->id,
                      w->step_id, n_work, plan.n_free_req_ids);
        }
    }
    free(who);
    free(grant);
    free(chunk);
    free(sp);
    free(wp);
    free(work);
    free(mine);
}

void sched_batch_plan_all(struct sched *s)
{
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *w = &s->workers[i];
        if (w->state == SCHED_WORKER_STATE_READY && w->n_inflight < SCHED_PLANS_INFLIGHT)
            plan_worker(s, w);
    }
}
