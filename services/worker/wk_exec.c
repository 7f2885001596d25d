/* wk_exec: the worker's exec thread. It owns the engine and the sequences (one per state slot),
 * validates every StepPlan item against its own capacity before touching the engine (the plan
 * is trusted for ownership, never for bounds), runs the first step (prefill chunks + decodes),
 * then the remaining granted decode steps back to back, sampling and reporting after each. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "model/sample.h"
#include "proto/tern.pb-c.h"
#include "wk.h"
#include "wk_grammar.h"
#include "wk_spec.h"

#define WK_EXEC_ITEMS_MAX 64  /* items per engine call (bounds the logits buffer) */
#define WK_EXEC_STOP_MAX 2048 /* stop ids per sequence */
#define WK_EXEC_SPEC_LOG_MS 10000 /* spec_stats log line at most this often while decoding */

struct wk_seq {
    bool used;
    uint64_t req_id;
    uint32_t *blocks; // (n_blocks) block table as last sent
    uint32_t n_blocks;
    uint32_t pos;  // tokens in the engine's state
    uint32_t last; // last sampled token, fed by the next decode
    bool has_last;
    bool stopped; // hit a stop id or max_new
    uint32_t n_generated, max_new;
    uint32_t *stop_ids; // (n_stop)
    uint32_t n_stop;
    struct sample_params sp; // bias_ids / ban_ids point at the fields below
    struct sample_rng rng;
    int32_t *bias_ids; // (sp.n_bias) logit_bias
    float *bias_vals;
    uint32_t min_tokens; // stop ids banned while n_generated < min_tokens
    bool logprobs;
    uint32_t top_logprobs;
    int32_t *hist; // (n_hist) prompt + generated tokens, for the penalties
    uint32_t n_hist, cap_hist;
    struct wk_gseq *gram; // json_schema (constrained decoding); NULL: off
    uint32_t *dev_allow;  // the grammar's mask for a token the engine draws (item_sample_on_device)
    struct wk_spec_gate gate; // speculation on or off for this sequence (wk_spec.h)
};

struct wk_exec {
    const struct wk_cfg *cfg;
    void *zctx;
    char endpoint[64];
    struct msg_sock pipe; // PAIR, connected to the link thread
    atomic_bool *stop;    // set by the link thread: leave the loop
    struct wk_engine *eng;
    struct wk_seq *seqs; // (n_slots) indexed by slot
    struct sample_ctx *sc;
    struct wk_spec *spec; // speculative rounds and their counters (K = 0: plain decoding)
    struct wk_grammar *gram; // vocabulary trie and mask of constrained decoding
    float *logits; // (WK_EXEC_ITEMS_MAX, vocab)
    uint64_t idle_since_ns;
    uint64_t n_plans, n_steps; // totals, logged at exit
    uint64_t n_tok_host, n_tok_engine; // tokens sampled here from logits / drawn by the engine
    uint64_t idle_us, busy_us; // waiting for a plan / executing plans
};

/* One plan item while the plan runs. */
struct job {
    const Tern__SeqWork *w;
    struct wk_seq *sq; // NULL when err
    int err;           // 0 or ERR_*
    const char *msg;
    bool err_sent;
    bool prefill;        // step 0 runs w->chunk_ids
    uint32_t steps_left; // decode steps still granted
    int spec_k;          // drafts of this step's speculative round; 0 = plain decode
};

static void env_init(Tern__Envelope *env, uint64_t req_id)
{
    tern__envelope__init(env);
    env->protocol_version = MSG_PROTOCOL_VERSION;
    env->req_id = req_id;
}

static void pipe_send(struct wk_exec *x, Tern__Envelope *env)
{
    int rc = msg_send(&x->pipe, NULL, &env->base);
    if (rc < 0)
        LOG_ERR("pipe_send_failed", "err=%s", err_str(rc));
}

// ---- sequences ----

static void seq_close(struct wk_exec *x, struct wk_seq *sq)
{
    if (!sq->used)
        return;
    x->eng->ops->seq_close(x->eng, (uint32_t)(sq - x->seqs));
    free(sq->blocks);
    free(sq->stop_ids);
    free(sq->hist);
    free(sq->bias_ids);
    free(sq->bias_vals);
    wk_gseq_destroy(sq->gram);
    free(sq->dev_allow);
    memset(sq, 0, sizeof *sq);
}

static struct wk_seq *seq_find(struct wk_exec *x, uint64_t req_id)
{
    for (uint32_t i = 0; i < x->eng->info.n_slots; i++)
        if (x->seqs[i].used && x->seqs[i].req_id == req_id)
            return &x->seqs[i];
    return NULL;
}

static void close_all(struct wk_exec *x)
{
    for (uint32_t i = 0; i < x->eng->info.n_slots; i++)
        seq_close(x, &x->seqs[i]);
}

static void sampling_from(struct wk_seq *sq, const Tern__SamplingParams *p, uint64_t req_id)
{
    sample_params_default(&sq->sp);
    uint64_t seed = req_id;
    if (p) {
        sq->sp.temperature = p->temperature;
        sq->sp.top_p = p->top_p;
        sq->sp.top_k = (int)p->top_k;
        sq->sp.min_p = p->min_p;
        sq->sp.repetition_penalty = p->repetition_penalty;
        sq->sp.presence_penalty = p->presence_penalty;
        sq->sp.frequency_penalty = p->frequency_penalty;
        if (p->has_seed)
            seed = p->seed;
        sq->logprobs = p->has_logprobs && p->logprobs;
        sq->top_logprobs =
            p->top_logprobs > MSG_MAX_TOP_LOGPROBS ? MSG_MAX_TOP_LOGPROBS : p->top_logprobs;
        sq->min_tokens = p->has_min_tokens ? p->min_tokens : 0;
        size_t nb = p->n_bias_ids < p->n_bias_values ? p->n_bias_ids : p->n_bias_values;
        if (nb > MSG_MAX_LOGIT_BIAS)
            nb = MSG_MAX_LOGIT_BIAS;
        if (nb) {
            sq->bias_ids = xmalloc(sizeof(int32_t) * nb);
            sq->bias_vals = xmalloc(sizeof(float) * nb);
            for (size_t i = 0; i < nb; i++) {
                sq->bias_ids[i] = p->bias_ids[i] > INT32_MAX ? -1 : (int32_t)p->bias_ids[i];
                sq->bias_vals[i] = isfinite(p->bias_values[i]) ? p->bias_values[i] : 0.0f;
            }
            sq->sp.bias_ids = sq->bias_ids;
            sq->sp.bias_vals = sq->bias_vals;
            sq->sp.n_bias = (int)nb;
        }
    }
    sample_rng_seed(&sq->rng, seed);
}

/* min_tokens: the stop ids are banned while fewer completion tokens exist */
static void seq_mask_update(struct wk_seq *sq)
{
    bool ban = sq->n_generated < sq->min_tokens;
    sq->sp.ban_ids = ban ? sq->stop_ids : NULL;
    sq->sp.n_ban = ban ? (int)sq->n_stop : 0;
}

/* Check one plan item and bind it to its sequence (creating it for new_seq). */
static void job_prepare(struct wk_exec *x, struct job *j, const Tern__SeqWork *w)
{
    const struct wk_engine_info *in = &x->eng->info;
    memset(j, 0, sizeof *j);
    j->w = w;
    struct wk_seq *sq;
    if (w->new_seq) {
        if (w->slot >= in->n_slots) {
            j->err = ERR_RANGE;
            j->msg = "slot out of range";
            return;
        }
        /* states in the pool: the scheduler names the chunk of blocks the state takes */
        if (in->state_blocks && (!w->has_state_block || w->state_block % in->state_blocks ||
                                 (uint64_t)w->state_block + in->state_blocks > in->kv_blocks)) {
            j->err = ERR_RANGE;
            j->msg = "state block missing, misaligned or out of range";
            return;
        }
        struct wk_seq *old = seq_find(x, w->req_id);
        if (old)
            seq_close(x, old);
        sq = &x->seqs[w->slot];
        if (sq->used) {
            /* the scheduler owns slot assignment: a stale holder is dropped */
            LOG_WARN("slot_reused", "req=%016" PRIx64 " slot=%u old_req=%016" PRIx64, w->req_id,
                     w->slot, sq->req_id);
            seq_close(x, sq);
        }
        if (w->n_stop_ids > WK_EXEC_STOP_MAX ||
            x->eng->ops->seq_open(x->eng, w->slot,
                                  in->state_blocks ? w->state_block : WK_ENGINE_NO_STATE) < 0) {
            j->err = ERR_INVAL;
            j->msg = "cannot open sequence";
            return;
        }
        sq->used = true;
        sq->req_id = w->req_id;
        wk_spec_gate_init(&sq->gate);
        sq->max_new = w->has_max_new ? w->max_new : UINT32_MAX;
        sq->n_stop = (uint32_t)w->n_stop_ids;
        sq->stop_ids = sq->n_stop ? xmalloc(sizeof(uint32_t) * sq->n_stop) : NULL;
        if (sq->n_stop)
            memcpy(sq->stop_ids, w->stop_ids, sizeof(uint32_t) * sq->n_stop);
        sampling_from(sq, w->sampling, w->req_id);
        seq_mask_update(sq);
        if (w->sampling && w->sampling->json_schema && w->sampling->json_schema[0]) {
            sq->gram = wk_gseq_create(x->gram, w->sampling->json_schema,
                                      w->sampling->json_replay, &j->msg);
            if (!sq->gram) {
                j->err = ERR_INVAL;
                return;
            }
        }
    } else {
        sq = seq_find(x, w->req_id);
        if (!sq || (uint32_t)(sq - x->seqs) != w->slot) {
            j->err = ERR_NOTFOUND;
            j->msg = "unknown sequence";
            return;
        }
    }
    j->sq = sq;
    if (w->n_block_table) {
        for (size_t i = 0; i < w->n_block_table; i++) {
            if (w->block_table[i] >= in->kv_blocks) {
                j->err = ERR_RANGE;
                j->msg = "block id out of range";
                return;
            }
        }
        sq->blocks = xrealloc(sq->blocks, sizeof(uint32_t) * w->n_block_table);
        memcpy(sq->blocks, w->block_table, sizeof(uint32_t) * w->n_block_table);
        sq->n_blocks = (uint32_t)w->n_block_table;
    }
    if (!w->n_chunk_ids && sq->stopped)
        return; /* a decode granted ahead (pipelined plan) after the sequence stopped: skip */
    uint64_t cap = (uint64_t)sq->n_blocks * in->block_tokens;
    if (cap > in->max_model_len)
        cap = in->max_model_len;
    if (w->pos != sq->pos) {
        j->err = ERR_STATE;
        j->msg = "position mismatch";
        return;
    }
    if (w->n_chunk_ids) {
        if (w->n_chunk_ids > in->max_step_tokens || w->pos + (uint64_t)w->n_chunk_ids > cap) {
            j->err = ERR_RANGE;
            j->msg = "prefill chunk beyond capacity";
            return;
        }
        j->prefill = true;
    } else if (w->decode_steps) {
        if (!sq->has_last) {
            j->err = ERR_STATE;
            j->msg = "decode without a sampled token";
            return;
        }
        if (w->pos + (uint64_t)w->decode_steps > cap) {
            j->err = ERR_RANGE;
            j->msg = "decode steps beyond the block table";
            return;
        }
        j->steps_left = w->decode_steps;
    }
}

// ---- sampling ----

/* log p of the sampled token under the raw logits, and the n_top most likely alternatives
 * (one pass keeping a small sorted list). */
static void fill_logprobs(const float *logits, uint32_t V, uint32_t tok, uint32_t n_top,
                          Tern__TokenLogprob *lp, uint32_t *top_ids, float *top_lps)
{
    float m = logits[0];
    for (uint32_t i = 1; i < V; i++)
        m = logits[i] > m ? logits[i] : m;
    double sum = 0.0;
    for (uint32_t i = 0; i < V; i++)
        sum += exp((double)(logits[i] - m));
    float lse = m + (float)log(sum);
    lp->has_logprob = true;
    lp->logprob = logits[tok] - lse;
    uint32_t n = 0;
    for (uint32_t i = 0; i < V && n_top; i++) {
        float v = logits[i];
        if (n == n_top && v <= logits[top_ids[n - 1]])
            continue;
        uint32_t at = n < n_top ? n++ : n - 1; /* drop the smallest when full */
        while (at > 0 && logits[top_ids[at - 1]] < v) {
            top_ids[at] = top_ids[at - 1];
            at--;
        }
        top_ids[at] = i;
    }
    for (uint32_t k = 0; k < n; k++)
        top_lps[k] = logits[top_ids[k]] - lse;
    lp->n_top_ids = lp->n_top_logprobs = n;
    lp->top_ids = top_ids;
    lp->top_logprobs = top_lps;
}

/* The penalties look at prompt + generated tokens (as `tern generate` does). */
static void hist_append(struct wk_seq *sq, const uint32_t *toks, uint32_t n)
{
    if (sq->n_hist + n > sq->cap_hist) {
        while (sq->n_hist + n > sq->cap_hist)
            sq->cap_hist = sq->cap_hist ? 2 * sq->cap_hist : 64;
        sq->hist = xrealloc(sq->hist, sizeof(int32_t) * sq->cap_hist);
    }
    for (uint32_t i = 0; i < n; i++)
        sq->hist[sq->n_hist++] = (int32_t)toks[i];
}

static bool is_stop_id(const struct wk_seq *sq, uint32_t tok)
{
    for (uint32_t i = 0; i < sq->n_stop; i++)
        if (sq->stop_ids[i] == tok)
            return true;
    return false;
}

/* A generated token joins the sequence: history, the next decode's input, stop checks. */
static void seq_push(struct wk_seq *sq, uint32_t tok)
{
    hist_append(sq, &tok, 1);
    sq->last = tok;
    sq->has_last = true;
    sq->n_generated++;
    seq_mask_update(sq);
    if (is_stop_id(sq, tok))
        sq->stopped = true;
    if (sq->n_generated >= sq->max_new)
        sq->stopped = true;
}

/* The grammar's mask for sq's next token, kept in sq for an engine that draws the token: false
 * when the mask cannot be made (the host path then reports why). */
static bool grammar_mask_for_device(struct wk_exec *x, struct wk_seq *sq)
{
    const uint32_t *allow = NULL;
    const char *msg = NULL;
    if (wk_grammar_mask(x->gram, sq->gram, sq->hist, sq->n_hist, sq->stop_ids, sq->n_stop,
                        &allow, &msg) < 0)
        return false;
    const size_t words = ((size_t)x->eng->info.vocab_size + 31) / 32;
    if (!sq->dev_allow)
        sq->dev_allow = xmalloc(sizeof(uint32_t) * words);
    memcpy(sq->dev_allow, allow, sizeof(uint32_t) * words);
    sq->sp.allow = sq->dev_allow;
    return true;
}

/* The engine draws sq's next token on the device (wk_engine.h) when it can and the sequence
 * needs only the token: no logprobs; a logit bias, banned ids (min_tokens) or a grammar only
 * when the engine applies them (info.device_sampling_procs, within its per-row rooms); with a
 * penalty, on a history the engine takes. it->logits is then NULL; a grammar's mask for the
 * token is made now (sp.allow). */
static void item_sample_on_device(struct wk_exec *x, struct wk_engine_item *it, struct wk_seq *sq)
{
    const struct wk_engine_info *in = &x->eng->info;
    const struct sample_params *p = &sq->sp;
    const bool procs = p->n_bias || p->n_ban || sq->gram;
    if (!it->logits || !in->device_sampling || sq->logprobs ||
        (procs && (!in->device_sampling_procs || (uint32_t)p->n_bias > in->device_sampling_max_bias ||
                   (uint32_t)p->n_ban > in->device_sampling_max_ban)) ||
        (sample_params_penalised(p) && sq->n_hist > in->device_sampling_max_hist))
        return;
    if (sq->gram && !grammar_mask_for_device(x, sq))
        return;
    it->logits = NULL;
    it->sp = &sq->sp;
    it->hist = sq->hist;
    it->n_hist = sq->n_hist;
    it->rng = &sq->rng;
    it->token = -1;
}

/* Sample sq's next token from logits (or take tok, drawn by the engine, when logits is NULL);
 * updates the sequence (its grammar too). Returns the token or < 0 with *msg set. */
static int64_t sample_next(struct wk_exec *x, struct wk_seq *sq, const float *logits,
                           int32_t tok, const char **msg)
{
    uint32_t V = x->eng->info.vocab_size;
    *msg = "sampling failed";
    if (sq->gram && logits) { /* a token drawn by the engine had its mask made before the step */
        int rc = wk_grammar_mask(x->gram, sq->gram, sq->hist, sq->n_hist, sq->stop_ids,
                                 sq->n_stop, &sq->sp.allow, msg);
        if (rc < 0)
            return rc;
    }
    int32_t t = logits ? sample_token(x->sc, &sq->sp, logits, sq->hist, (int)sq->n_hist, &sq->rng)
                       : tok;
    if (logits)
        x->n_tok_host++;
    else
        x->n_tok_engine++;
    sq->sp.allow = NULL;
    if (t < 0 || (uint32_t)t >= V)
        return ERR_INVAL;
    if (sq->gram && wk_grammar_accept(x->gram, sq->gram, t, is_stop_id(sq, (uint32_t)t)) < 0) {
        *msg = "json_schema refused the sampled token";
        return ERR_STATE;
    }
    seq_push(sq, (uint32_t)t);
    return t;
}

// ---- plans ----

struct step_out {
    Tern__SeqResult *res; // (n) one per job that reports this step
    Tern__SeqResult **resp;
    uint32_t *tok;            // (n, k1) the tokens of each result
    Tern__TokenLogprob *lp;   // (n, k1)
    Tern__TokenLogprob **lpp; // (n, k1)
    uint32_t *top_ids;        // (n, k1, MSG_MAX_TOP_LOGPROBS)
    float *top_lps;
    uint32_t n;
    uint32_t k1; // most tokens per result: speculative K + 1
};

/* The result of a speculative round of job j: toks (n) emitted, rows (n, V) their logits. */
static void result_tokens(struct wk_exec *x, struct step_out *so, const struct job *j,
                          const uint32_t *toks, uint32_t n, const float *rows)
{
    const uint32_t V = x->eng->info.vocab_size;
    const size_t at = (size_t)so->n * so->k1;
    Tern__SeqResult *r = &so->res[so->n];
    tern__seq_result__init(r);
    r->has_req_id = r->has_stopped = r->has_n_computed = true;
    r->req_id = j->w->req_id;
    memcpy(&so->tok[at], toks, sizeof(uint32_t) * n);
    r->n_token_ids = n;
    r->token_ids = &so->tok[at];
    r->stopped = j->sq->stopped;
    r->n_computed = j->sq->pos;
    if (j->sq->logprobs) {
        for (uint32_t t = 0; t < n; t++) {
            Tern__TokenLogprob *lp = &so->lp[at + t];
            tern__token_logprob__init(lp);
            fill_logprobs(rows + (size_t)t * V, V, toks[t], j->sq->top_logprobs, lp,
                          so->top_ids + (at + t) * MSG_MAX_TOP_LOGPROBS,
                          so->top_lps + (at + t) * MSG_MAX_TOP_LOGPROBS);
            so->lpp[at + t] = lp;
        }
        r->n_logprobs = n;
        r->logprobs = &so->lpp[at];
    }
    so->resp[so->n++] = r;
}

/* A speculative round of a sequence whose processors change with every token (model/spec.h
 * spec_hook): row i sees min_tokens' ban and the grammar's mask of the state after the i tokens
 * emitted before it; each emitted token advances the grammar (so run_spec_rounds must not). */
struct spec_seq {
    struct wk_exec *x;
    struct wk_seq *sq;
    const char *msg; // why the hook ended the round, when it did
};

static int spec_row(void *user, int i, struct sample_params *p)
{
    struct spec_seq *c = user;
    struct wk_seq *sq = c->sq;
    const bool ban = sq->n_generated + (uint32_t)i < sq->min_tokens;
    p->ban_ids = ban ? sq->stop_ids : NULL;
    p->n_ban = ban ? (int)sq->n_stop : 0;
    if (sq->gram)
        return wk_grammar_mask(c->x->gram, sq->gram, sq->hist, sq->n_hist, sq->stop_ids,
                               sq->n_stop, &p->allow, &c->msg);
    return 0;
}

static int spec_emit(void *user, int i, int32_t t)
{
    (void)i;
    struct spec_seq *c = user;
    const bool stop = t >= 0 && is_stop_id(c->sq, (uint32_t)t);
    if (c->sq->gram && wk_grammar_accept(c->x->gram, c->sq->gram, t, stop) < 0) {
        c->msg = "json_schema refused the sampled token";
        return ERR_STATE;
    }
    return stop ? 1 : 0;
}

/* This step's speculative rounds (jobs with spec_k set), one sequence after the other. */
static void run_spec_rounds(struct wk_exec *x, struct job *jobs, uint32_t nj, struct step_out *so)
{
    uint32_t toks[WK_SPEC_MAX + 1];
    for (uint32_t i = 0; i < nj; i++) {
        struct job *j = &jobs[i];
        if (j->err || !j->spec_k)
            continue;
        struct wk_seq *sq = j->sq;
        const float *rows = NULL;
        struct spec_seq ss = {.x = x, .sq = sq, .msg = NULL};
        const struct spec_hook hook = {.user = &ss, .row = spec_row, .emit = spec_emit};
        const bool hooked = sq->gram || sq->min_tokens > sq->n_generated;
        const uint64_t t0 = clock_now_ns();
        int r = wk_spec_round(x->spec, x->eng, (uint32_t)(sq - x->seqs), sq->pos, sq->last,
                              j->spec_k, sq->blocks, sq->n_blocks, x->sc, &sq->sp, sq->hist,
                              sq->n_hist, &sq->rng, hooked ? &hook : NULL, toks, &rows);
        if (r > 0) {
            wk_spec_cost(x->spec, true, clock_now_ns() - t0);
            wk_spec_gate_note(&sq->gate, r);
        }
        sq->sp.allow = NULL; /* the hook's masks belong to the round */
        j->spec_k = 0;
        if (r < 0) {
            j->err = r;
            j->msg = ss.msg ? ss.msg : "speculative round failed";
            j->err_sent = false;
            continue;
        }
        sq->pos += (uint32_t)r; /* the engine committed x and the accepted drafts */
        j->steps_left -= (uint32_t)r < j->steps_left ? (uint32_t)r : j->steps_left;
        uint32_t n = 0;
        while (n < (uint32_t)r && !sq->stopped)
            seq_push(sq, toks[n++]); /* tokens after a stop are dropped */
        result_tokens(x, so, j, toks, n, rows);
    }
}

static void run_plan(struct wk_exec *x, const Tern__StepPlan *p)
{
    uint64_t t0 = clock_now_ns();
    uint32_t idle_us = (uint32_t)((t0 - x->idle_since_ns) / 1000);
    if (x->n_plans++)
        x->idle_us += idle_us; /* not the wait for the very first plan */
    LOG_DEBUG("plan_start", "step=%" PRIu64 " seqs=%zu frees=%zu idle_us=%u", p->step_id, p->n_seqs,
              p->n_free_req_ids, idle_us);
    const struct wk_engine_info *in = &x->eng->info;
    for (size_t i = 0; i < p->n_free_req_ids; i++) {
        struct wk_seq *sq = seq_find(x, p->free_req_ids[i]);
        if (sq)
            seq_close(x, sq);
    }
    uint32_t nj = (uint32_t)p->n_seqs;
    struct job *jobs = xcalloc(nj ? nj : 1, sizeof *jobs);
    for (uint32_t i = 0; i < nj; i++) {
        job_prepare(x, &jobs[i], p->seqs[i]);
        if (jobs[i].err && p->seqs[i]->new_seq) {
            /* a refused first chunk leaves no half-made sequence behind */
            struct wk_seq *sq = seq_find(x, p->seqs[i]->req_id);
            if (sq)
                seq_close(x, sq);
            jobs[i].sq = NULL;
        }
    }

    struct wk_engine_item *items = xcalloc(nj ? nj : 1, sizeof *items);
    uint32_t *item_job = xcalloc(nj ? nj : 1, sizeof *item_job);
    struct step_out so;
    so.res = xcalloc(nj ? nj : 1, sizeof *so.res);
    so.resp = xcalloc(nj ? nj : 1, sizeof *so.resp);
    so.k1 = (uint32_t)wk_spec_k(x->spec) + 1;
    const size_t n_tok = (size_t)(nj ? nj : 1) * so.k1;
    so.tok = xcalloc(n_tok, sizeof *so.tok);
    so.lp = xcalloc(n_tok, sizeof *so.lp);
    so.lpp = xcalloc(n_tok, sizeof *so.lpp);
    so.top_ids = xcalloc(n_tok * MSG_MAX_TOP_LOGPROBS, sizeof *so.top_ids);
    so.top_lps = xcalloc(n_tok * MSG_MAX_TOP_LOGPROBS, sizeof *so.top_lps);

    for (uint32_t step = 0;; step++) {
        uint64_t ts = clock_now_ns();
        uint32_t ni = 0;
        /* items of this step, in chunks of WK_EXEC_ITEMS_MAX sharing the logits buffer */
        so.n = 0;
        for (uint32_t i = 0; i < nj; i++) {
            struct job *j = &jobs[i];
            if (j->err && !j->err_sent) {
                Tern__SeqResult *r = &so.res[so.n];
                tern__seq_result__init(r);
                r->has_req_id = r->has_error = true;
                r->req_id = j->w->req_id;
                r->error = TERN__ERROR_CODE__ERROR_CODE_INVALID;
                r->error_message = (char *)j->msg;
                so.resp[so.n++] = r;
                j->err_sent = true;
                LOG_WARN("plan_item_refused", "req=%016" PRIx64 " err=%s msg=\"%s\"", j->w->req_id,
                         err_str(j->err), j->msg);
            }
        }
        for (uint32_t i = 0; i < nj; i++) {
            struct job *j = &jobs[i];
            if (j->err)
                continue;
            struct wk_engine_item *it = &items[ni];
            memset(it, 0, sizeof *it);
            if (step == 0 && j->prefill) {
                it->tokens = j->w->chunk_ids;
                it->n = (uint32_t)j->w->n_chunk_ids;
                it->logits = j->w->sample ? x->logits : NULL; /* placed per sub-batch */
                /* the penalties of this chunk's sample see the chunk (before the engine draws) */
                hist_append(j->sq, it->tokens, it->n);
            } else if (j->steps_left && !j->sq->stopped) {
                uint64_t cap = (uint64_t)j->sq->n_blocks * in->block_tokens;
                if (cap > in->max_model_len)
                    cap = in->max_model_len;
                /* a min_tokens ban or a grammar mask that changes inside the window rides the
                 * round's hook (run_spec_rounds) */
                j->spec_k = wk_spec_round_k(x->spec, &j->sq->gate, &j->sq->sp, j->sq->pos,
                                            j->steps_left, cap);
                if (j->spec_k)
                    continue; /* a speculative round after the batched items */
                it->tokens = &j->sq->last;
                it->n = 1;
                it->logits = x->logits;
                j->steps_left--;
            } else {
                continue;
            }
            item_sample_on_device(x, it, j->sq);
            it->slot = (uint32_t)(j->sq - x->seqs);
            it->pos = j->sq->pos;
            it->blocks = j->sq->blocks;
            it->n_blocks = j->sq->n_blocks;
            item_job[ni++] = i;
        }
        bool spec_round = false;
        for (uint32_t i = 0; i < nj; i++)
            spec_round |= !jobs[i].err && jobs[i].spec_k;
        if (ni == 0 && so.n == 0 && step > 0 && !spec_round)
            break;
        /* a step of decode rows only times a plain decode step for the speculation gates */
        bool decode_only = ni > 0 && wk_spec_k(x->spec);
        for (uint32_t i = 0; i < ni; i++)
            decode_only =
                decode_only && items[i].n == 1 && items[i].tokens == &jobs[item_job[i]].sq->last;
        uint64_t engine_ns = 0;
        /* engine calls in sub-batches; sample each sub-batch before the next overwrites logits */
        for (uint32_t o = 0; o < ni; o += WK_EXEC_ITEMS_MAX) {
            uint32_t m = ni - o < WK_EXEC_ITEMS_MAX ? ni - o : WK_EXEC_ITEMS_MAX;
            for (uint32_t i = 0; i < m; i++)
                if (items[o + i].logits)
                    items[o + i].logits = x->logits + (size_t)i * in->vocab_size;
            const uint64_t te = clock_now_ns();
            int rc = x->eng->ops->step(x->eng, items + o, m);
            engine_ns += clock_now_ns() - te;
            for (uint32_t i = 0; i < m; i++) {
                struct wk_engine_item *it = &items[o + i];
                struct job *j = &jobs[item_job[o + i]];
                if (rc < 0 || it->rc < 0) {
                    j->err = rc < 0 ? rc : it->rc;
                    j->msg = "engine step failed";
                    j->err_sent = false;
                    continue;
                }
                j->sq->pos += it->n;
                if (!it->logits && !it->sp)
                    continue;
                int64_t t = sample_next(x, j->sq, it->logits, it->token, &j->msg);
                if (t < 0) {
                    j->err = (int)t;
                    continue;
                }
                Tern__SeqResult *r = &so.res[so.n];
                tern__seq_result__init(r);
                r->has_req_id = r->has_stopped = r->has_n_computed = true;
                r->req_id = j->w->req_id;
                const size_t at = (size_t)so.n * so.k1;
                so.tok[at] = (uint32_t)t;
                r->n_token_ids = 1;
                r->token_ids = &so.tok[at];
                r->stopped = j->sq->stopped;
                r->n_computed = j->sq->pos;
                if (j->sq->logprobs) {
                    Tern__TokenLogprob *lp = &so.lp[at];
                    tern__token_logprob__init(lp);
                    fill_logprobs(it->logits, in->vocab_size, (uint32_t)t, j->sq->top_logprobs, lp,
                                  so.top_ids + at * MSG_MAX_TOP_LOGPROBS,
                                  so.top_lps + at * MSG_MAX_TOP_LOGPROBS);
                    so.lpp[at] = lp;
                    r->n_logprobs = 1;
                    r->logprobs = &so.lpp[at];
                }
                so.resp[so.n++] = r;
            }
        }
        if (decode_only)
            wk_spec_cost(x->spec, false, engine_ns);
        run_spec_rounds(x, jobs, nj, &so);
        /* errors raised by the engine this step are reported next turn; is there more work? */
        bool more = false;
        for (uint32_t i = 0; i < nj; i++) {
            struct job *j = &jobs[i];
            more |= (j->err && !j->err_sent) || (!j->err && j->steps_left && !j->sq->stopped);
        }
        Tern__Envelope env;
        Tern__StepResult res = TERN__STEP_RESULT__INIT;
        env_init(&env, 0);
        res.has_step_id = res.has_done = res.has_compute_us = true;
        res.step_id = p->step_id;
        res.n_seqs = so.n;
        res.seqs = so.resp;
        res.done = !more;
        res.compute_us = (uint32_t)((clock_now_ns() - ts) / 1000);
        if (step == 0) {
            res.has_idle_us = true;
            res.idle_us = idle_us;
        }
        struct wk_spec_counts sd;
        wk_spec_take(x->spec, &sd);
        if (sd.drafts) {
            res.has_spec_drafts = res.has_spec_draft_tokens = res.has_spec_accepted_tokens = true;
            res.spec_drafts = sd.drafts;
            res.spec_draft_tokens = sd.draft_tokens;
            res.spec_accepted_tokens = sd.accepted;
            res.n_spec_accepted_per_pos = sd.n_pos;
            res.spec_accepted_per_pos = sd.per_pos;
        }
        env.body_case = TERN__ENVELOPE__BODY_STEP_RESULT;
        env.step_result = &res;
        pipe_send(x, &env);
        x->n_steps++;
        if (!more)
            break;
    }
    free(so.top_lps);
    free(so.top_ids);
    free(so.lpp);
    free(so.lp);
    free(so.tok);
    free(so.resp);
    free(so.res);
    free(item_job);
    free(items);
    free(jobs);
    x->idle_since_ns = clock_now_ns();
    x->busy_us += (x->idle_since_ns - t0) / 1000;
    wk_spec_log(x->spec, x->idle_since_ns / 1000000, WK_EXEC_SPEC_LOG_MS, false);
}

// ---- thread ----

struct wk_exec *wk_exec_create(const struct wk_cfg *cfg, void *zctx, const char *pipe_endpoint,
                               atomic_bool *stop)
{
    struct wk_exec *x = xcalloc(1, sizeof *x);
    x->cfg = cfg;
    x->zctx = zctx;
    x->stop = stop;
    snprintf(x->endpoint, sizeof x->endpoint, "%s", pipe_endpoint);
    struct msg_sock_opts o = {.max_bytes = (size_t)cfg->max_msg_bytes};
    if (msg_sock_connect(&x->pipe, zctx, MSG_KIND_PAIR, pipe_endpoint, &tern__envelope__descriptor,
                         &o) < 0) {
        free(x);
        return NULL;
    }
    return x;
}

void wk_exec_destroy(struct wk_exec *x)
{
    if (!x)
        return;
    if (x->eng)
        close_all(x);
    free(x->seqs);
    free(x->logits);
    sample_ctx_destroy(x->sc);
    wk_spec_destroy(x->spec);
    wk_grammar_destroy(x->gram);
    wk_engine_destroy(x->eng);
    msg_sock_close(&x->pipe);
    free(x);
}

static void on_progress(void *ctx, float fraction, const char *stage)
{
    struct wk_exec *x = ctx;
    Tern__Envelope env;
    Tern__LoadProgress lp = TERN__LOAD_PROGRESS__INIT;
    env_init(&env, 0);
    lp.worker_id = (char *)x->cfg->worker_id;
    lp.has_fraction = true;
    lp.fraction = fraction;
    lp.stage = (char *)stage;
    env.body_case = TERN__ENVELOPE__BODY_LOAD_PROGRESS;
    env.load_progress = &lp;
    pipe_send(x, &env);
}

static void send_capacity(struct wk_exec *x)
{
    const struct wk_engine_info *in = &x->eng->info;
    Tern__Envelope env;
    Tern__Register r = TERN__REGISTER__INIT;
    env_init(&env, 0);
    r.worker_id = (char *)x->cfg->worker_id;
    r.model_id = (char *)in->model_id;
    r.engine = (char *)x->eng->name;
    r.has_max_model_len = r.has_max_seqs = r.has_block_tokens = r.has_kv_blocks = true;
    r.has_kv_bytes = r.has_state_slots = r.has_vocab_size = r.has_max_step_tokens = true;
    r.max_model_len = in->max_model_len;
    r.max_seqs = in->n_slots;
    r.block_tokens = in->block_tokens;
    r.kv_blocks = in->kv_blocks;
    r.kv_bytes = in->kv_bytes;
    r.state_slots = in->n_slots;
    r.has_state_blocks = in->state_blocks > 0;
    r.state_blocks = in->state_blocks;
    r.vocab_size = in->vocab_size;
    r.max_step_tokens = in->max_step_tokens;
    r.has_spec_tokens = true;
    r.spec_tokens = in->spec_k;
    r.n_eos_ids = in->n_eos;
    r.eos_ids = (uint32_t *)in->eos_ids;
    env.body_case = TERN__ENVELOPE__BODY_REGISTER_WORKER;
    env.register_worker = &r;
    pipe_send(x, &env);
}

static void send_load_error(struct wk_exec *x, int rc)
{
    char msg[160];
    snprintf(msg, sizeof msg, "engine %s failed to load: %s", x->cfg->engine, err_str(rc));
    Tern__Envelope env;
    Tern__Error e = TERN__ERROR__INIT;
    env_init(&env, 0);
    e.has_code = true;
    e.code = TERN__ERROR_CODE__ERROR_CODE_INTERNAL;
    e.message = msg;
    env.body_case = TERN__ENVELOPE__BODY_ERROR;
    env.error = &e;
    pipe_send(x, &env);
}

void *wk_exec_main(void *arg)
{
    struct wk_exec *x = arg;
    on_progress(x, 0.0f, "weights");
    int rc = wk_engine_create(x->cfg, on_progress, x, &x->eng);
    if (rc == 0) {
        x->seqs = xcalloc(x->eng->info.n_slots, sizeof *x->seqs);
        x->logits = malloc(sizeof(float) * WK_EXEC_ITEMS_MAX * x->eng->info.vocab_size);
        x->sc = sample_ctx_create((int)x->eng->info.vocab_size);
        x->spec = wk_spec_create(x->eng, x->cfg->speculative_tokens > 0,
                                 x->cfg->speculative_gate != 0);
        x->gram = wk_grammar_create(x->cfg->model, x->eng->info.vocab_size);
        if (!x->logits || !x->sc)
            rc = ERR_NOMEM;
    }
    if (rc < 0) {
        send_load_error(x, rc);
        return NULL;
    }
    on_progress(x, 1.0f, "ready");
    send_capacity(x);
    x->idle_since_ns = clock_now_ns();
    while (!atomic_load(x->stop)) {
        rc = msg_sock_wait(&x->pipe, 100);
        if (rc <= 0)
            continue;
        ProtobufCMessage *m;
        while (msg_recv(&x->pipe, NULL, &m) == 0) {
            Tern__Envelope *env = (Tern__Envelope *)m;
            if (env->body_case == TERN__ENVELOPE__BODY_STEP_PLAN) {
                run_plan(x, env->step_plan);
            } else if (env->body_case == TERN__ENVELOPE__BODY_RESET) {
                close_all(x);
                pipe_send(x, env); /* echo = done */
            }
            msg_free(m);
        }
    }
    if (x->spec)
        wk_spec_log(x->spec, clock_now_ms(), 0, true);
    LOG_INFO("exec_stats",
             "plans=%" PRIu64 " steps=%" PRIu64 " busy_us=%" PRIu64 " idle_us=%" PRIu64
             " idle_us_per_plan=%" PRIu64 " tokens_host=%" PRIu64 " tokens_engine=%" PRIu64,
             x->n_plans, x->n_steps, x->busy_us, x->idle_us,
             x->n_plans > 1 ? x->idle_us / (x->n_plans - 1) : 0, x->n_tok_host, x->n_tok_engine);
    return NULL;
}
