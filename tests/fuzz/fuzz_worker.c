/* fuzz_worker: the worker's plan executor (services/worker/wk_exec.c: job_prepare validation,
 * run_plan with prefill chunks, pipelined decode steps, sampling, stop ids, logprobs, frees,
 * Reset) on the fake engine, fed fuzzed StepPlans. wk_exec.c is included to reach run_plan
 * without its thread; results go over the real inproc PAIR and are read back and checked.
 * Plans are raw bytes (unpacked as msg_recv does) or built from the input with positions and
 * slots taken from the executor's live sequences, so that validation passes often enough to
 * reach the engine and the sampler. Input: a sequence of ops. */
#include "wk_exec.c"

#include "fuzz.h"

#define MAX_OPS 32
#define MAX_SEQS 6
#define PIPE_EP "inproc://fz-wk-pipe"

static struct wk_cfg g_cfg;
static void *g_zctx;
static struct msg_sock g_peer; /* the link thread's end of the pipe */
static struct wk_exec *g_x;
static atomic_bool g_stop;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *args[] = {(char *)"fuzz_worker", (char *)"--engine", (char *)"fake", NULL};
    if (wk_cfg_parse(&g_cfg, 3, args) != 0)
        abort();
    snprintf(g_cfg.engine, sizeof(g_cfg.engine), "fake");
    g_cfg.max_seqs = 4;
    g_cfg.block_tokens = 4;
    g_cfg.kv_blocks = 24;
    g_cfg.max_model_len = 64;
    g_cfg.max_step_tokens = 32;
    g_cfg.fake_vocab = 64;
    g_cfg.fake_eos = 3;
    g_cfg.fake_step_us = 0;
    log_init("fuzz_worker", LOG_LEVEL_OFF);
    g_zctx = msg_context_create();
    struct msg_sock_opts o = {0};
    if (!g_zctx ||
        msg_sock_bind(&g_peer, g_zctx, MSG_KIND_PAIR, PIPE_EP, &tern__envelope__descriptor, &o))
        abort();
    g_x = wk_exec_create(&g_cfg, g_zctx, PIPE_EP, &g_stop);
    if (!g_x || wk_engine_create(&g_cfg, NULL, NULL, &g_x->eng) != 0)
        abort();
    g_x->seqs = xcalloc(g_x->eng->info.n_slots, sizeof *g_x->seqs);
    g_x->logits = xmalloc(sizeof(float) * WK_EXEC_ITEMS_MAX * g_x->eng->info.vocab_size);
    g_x->sc = sample_ctx_create((int)g_x->eng->info.vocab_size);
    g_x->spec = wk_spec_create(g_x->eng, g_cfg.speculative_tokens > 0,
                               g_cfg.speculative_gate != 0); /* as wk_exec_main */
    return 0;
}

/* Read back what the executor sent and check it against the plan. */
static void drain(const Tern__StepPlan *p)
{
    ProtobufCMessage *m;
    while (msg_recv(&g_peer, NULL, &m) == 0) {
        Tern__Envelope *env = (Tern__Envelope *)m;
        if (env->body_case == TERN__ENVELOPE__BODY_STEP_RESULT && p) {
            const Tern__StepResult *r = env->step_result;
            if (r->step_id != p->step_id)
                __builtin_trap(); /* results answer the plan that ran */
            for (size_t i = 0; i < r->n_seqs; i++) {
                const Tern__SeqResult *q = r->seqs[i];
                bool known = false;
                for (size_t k = 0; k < p->n_seqs && !known; k++)
                    known = p->seqs[k]->req_id == q->req_id;
                if (!known)
                    __builtin_trap(); /* a result for a sequence the plan did not name */
                for (size_t t = 0; t < q->n_token_ids; t++)
                    if (q->token_ids[t] >= g_x->eng->info.vocab_size)
                        __builtin_trap();
                if (q->n_logprobs && q->n_logprobs != q->n_token_ids)
                    __builtin_trap();
                for (size_t t = 0; t < q->n_logprobs; t++)
                    if (q->logprobs[t]->n_top_ids > MSG_MAX_TOP_LOGPROBS ||
                        q->logprobs[t]->n_top_ids != q->logprobs[t]->n_top_logprobs)
                        __builtin_trap();
            }
        }
        msg_free(m);
    }
}

static void run_raw(struct fz *f)
{
    size_t n;
    const uint8_t *p = fz_take(f, 1024, &n);
    ProtobufCMessage *m = protobuf_c_message_unpack(&tern__envelope__descriptor, NULL, n, p);
    if (!m)
        return;
    Tern__Envelope *env = (Tern__Envelope *)m;
    if (env->body_case == TERN__ENVELOPE__BODY_STEP_PLAN) {
        run_plan(g_x, env->step_plan);
        drain(env->step_plan);
    } else if (env->body_case == TERN__ENVELOPE__BODY_RESET) {
        close_all(g_x);
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

static void run_built(struct fz *f, uint64_t step_id)
{
    const struct wk_engine_info *in = &g_x->eng->info;
    Tern__StepPlan p = TERN__STEP_PLAN__INIT;
    Tern__SeqWork w[MAX_SEQS], *wp[MAX_SEQS];
    Tern__SamplingParams sp[MAX_SEQS];
    uint32_t blocks[MAX_SEQS][24], chunk[MAX_SEQS][40], stops[MAX_SEQS][4];
    uint64_t frees[4];
    p.has_step_id = 1;
    p.step_id = step_id;
    p.n_free_req_ids = fz_u8(f) % 5;
    for (size_t i = 0; i < p.n_free_req_ids; i++)
        frees[i] = 1 + fz_u8(f) % 8;
    p.free_req_ids = frees;
    p.n_seqs = fz_u8(f) % (MAX_SEQS + 1);
    for (size_t i = 0; i < p.n_seqs; i++) {
        Tern__SeqWork *s = &w[i];
        *s = (Tern__SeqWork)TERN__SEQ_WORK__INIT;
        uint8_t fl = fz_u8(f), fl2 = fz_u8(f);
        s->has_req_id = s->has_slot = s->has_pos = 1;
        s->req_id = 1 + fz_u8(f) % 8;
        struct wk_seq *cur = seq_find(g_x, s->req_id);
        s->slot = cur && !(fl & 1) ? (uint32_t)(cur - g_x->seqs) : fz_u8(f) % (in->n_slots + 2);
        s->has_new_seq = 1;
        s->new_seq = !cur || (fl & 2);
        s->pos = (s->new_seq ? 0 : cur->pos) + ((fl & 4) ? fz_u8(f) % 5 : 0);
        size_t nb = fz_u8(f) % 25;
        for (size_t k = 0; k < nb; k++)
            blocks[i][k] = (fl2 & 1) ? fz_u8(f) : (uint32_t)k;
        s->n_block_table = nb;
        s->block_table = blocks[i];
        if (fl & 8) {
            s->n_chunk_ids = fz_u8(f) % 41;
            for (size_t k = 0; k < s->n_chunk_ids; k++)
                chunk[i][k] = (fl2 & 2) ? fz_u8(f) : fz_u8(f) % in->vocab_size;
            s->chunk_ids = chunk[i];
        }
        s->has_sample = 1;
        s->sample = (fl & 16) != 0;
        s->has_decode_steps = 1;
        s->decode_steps = fz_u8(f) % 5;
        if (s->new_seq && (fl & 32)) {
            Tern__SamplingParams *q = &sp[i];
            *q = (Tern__SamplingParams)TERN__SAMPLING_PARAMS__INIT;
            q->has_temperature = 1;
            q->temperature = (fl2 & 4) ? 0.0f : (float)fz_u8(f) / 50.0f;
            q->has_top_p = 1;
            q->top_p = (float)fz_u8(f) / 255.0f;
            q->has_top_k = 1;
            q->top_k = fz_u8(f) % 80;
            q->has_min_p = 1;
            q->min_p = (float)(fz_u8(f) % 128) / 255.0f;
            q->has_presence_penalty = q->has_frequency_penalty = q->has_repetition_penalty = 1;
            q->presence_penalty = (float)((int)fz_u8(f) - 128) / 64.0f;
            q->frequency_penalty = (float)((int)fz_u8(f) - 128) / 64.0f;
            q->repetition_penalty = (float)fz_u8(f) / 64.0f;
            q->has_logprobs = 1;
            q->logprobs = (fl2 & 8) != 0;
            q->has_top_logprobs = 1;
            q->top_logprobs = fz_u8(f) % 30;
            q->has_seed = 1;
            q->seed = fz_u32(f);
            s->sampling = q;
        }
        if (s->new_seq) {
            s->n_stop_ids = fz_u8(f) % 5;
            for (size_t k = 0; k < s->n_stop_ids; k++)
                stops[i][k] = fz_u8(f) % in->vocab_size;
            s->stop_ids = stops[i];
            s->has_max_new = (fl2 & 16) != 0;
            s->max_new = fz_u8(f) % 20;
        }
        wp[i] = s;
    }
    p.seqs = wp;
    run_plan(g_x, &p);
    drain(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint64_t step = 0;
    for (int k = 0; k < MAX_OPS && f.n > 0; k++) {
        uint8_t op = fz_u8(&f);
        if (op % 8 == 0)
            run_raw(&f);
        else if (op % 8 == 7)
            close_all(g_x); /* Reset */
        else
            run_built(&f, ++step);
    }
    close_all(g_x); /* the next input starts from an empty executor */
    drain(NULL);
    return 0;
}
