/* tern generate: load a checkpoint and generate tokens with the CPU reference forward pass
 * (model/forward.h) and the sampler (model/sample.h). Prints the generated ids on stdout and
 * timing on stderr; --dump-logits writes the logits of every position as raw fp32. With an MTP
 * head, speculative decoding (model/spec.h) drafts K tokens per round and verifies them in one
 * forward pass; the output is the same as without it (identical at temperature 0, the same
 * distribution when sampling). */
#include "common/args.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/tpool.h"
#include "common/xalloc.h"
#include "model/forward.h"
#include "model/forward_spec.h"
#include "model/model_load.h"
#include "model/mtp.h"
#include "model/sample.h"
#include "model/spec.h"
#include "model/state.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_generate(int argc, char **argv);
const char tern_cmd_generate_help[] = "generate tokens with the CPU reference forward pass";

#define GEN_PREFILL_MAX 256    // tokens per prefill call

static const char NOTES[] =
    "  --dump-logits writes one row of V per position of the final sequence except the last:\n"
    "  prompt rows first (n_prompt + n_generated - 1 rows). Speculative decoding defaults to 3\n"
    "  drafts at temperature 0 when the checkpoint has mtp.* tensors, else off; sampling\n"
    "  (--temperature > 0) speculates only when K is given, so seeded runs print what plain\n"
    "  sampling prints unless asked. --dump-mtp row p comes from (token p+1, hidden p), the last\n"
    "  with the first sampled token (n_prompt rows).\n"
    "  Exit: 0 done, 1 runtime error (load, write), 2 usage error.\n";

struct gen_opts {
    const char *model;
    const char *ids;
    const char *prompt;
    const char *dump;
    const char *dump_mtp;
    const char *backend;
    int max_tokens;
    int threads;
    uint64_t seed;
    bool ignore_eos;
    bool recurrent;
    bool print_text;
    int spec;                  // -1: default (spec_configure)
    struct sample_params sp;
};

/* 0, or what args_exit turns into the exit code (after the help or the usage-error line) */
static int parse_args(struct gen_opts *o, int argc, char **argv, struct args_spec *spec)
{
    memset(o, 0, sizeof(*o));
    o->max_tokens = 16;
    o->spec = -1;
    o->backend = "cpu";
    sample_params_default(&o->sp);
    o->sp.temperature = 0.0f;
    const struct args_opt opts[] = {
        ARGS_STR("--model", "DIR", &o->model, "checkpoint directory (required)"),
        ARGS_STR("--ids", "1,2,3", &o->ids, "prompt token ids"),
        ARGS_STR("--prompt", "TEXT", &o->prompt, "prompt text (needs tokenizer.json)"),
        ARGS_INT("--max-tokens", "N", &o->max_tokens, 0, 1 << 24, "tokens to generate (16)"),
        ARGS_FLOAT("--temperature", "T", &o->sp.temperature, 0, 100, "0 = greedy (0)"),
        ARGS_FLOAT("--top-p", "P", &o->sp.top_p, 0, 1, "nucleus truncation, (0, 1] (1 = off)"),
        ARGS_INT("--top-k", "K", &o->sp.top_k, -1, 1 << 24, "top-k truncation (0 or -1 = off)"),
        ARGS_FLOAT("--min-p", "P", &o->sp.min_p, 0, 1, "min-p truncation (0 = off)"),
        ARGS_U64("--seed", "S", &o->seed, "sampler seed (0)"),
        ARGS_STR("--backend", "cpu", &o->backend, "only the CPU reference exists here"),
        ARGS_INT("--threads", "N", &o->threads, 0, 4096, "CPU threads, 0 = all (0)"),
        ARGS_BOOL("--ignore-eos", &o->ignore_eos, "do not stop at the config's eos ids"),
        ARGS_BOOL("--recurrent", &o->recurrent,
                  "GDN by the per-token recurrence also in prefill (testing)"),
        ARGS_BOOL("--print-text", &o->print_text,
                  "also print the decoded text (needs tokenizer.json)"),
        ARGS_STR("--dump-logits", "FILE", &o->dump, "raw little-endian fp32 logits"),
        ARGS_INT("--speculative-tokens", "K", &o->spec, 0, FORWARD_SPEC_MAX,
                 "MTP speculative decoding with K drafts per round (0 = off)"),
        ARGS_INT("--spec", "K", &o->spec, 0, FORWARD_SPEC_MAX, "same as --speculative-tokens"),
        ARGS_STR("--dump-mtp", "FILE", &o->dump_mtp,
                 "raw fp32 MTP logits of the prompt pass (needs mtp.* tensors)"),
    };
    spec->opts = opts;
    spec->n_opts = ARRAY_LEN(opts);
    int rc = args_parse(spec, argc, argv);
    spec->opts = NULL; /* the table lives on this stack frame */
    spec->n_opts = 0;
    if (rc != 0)
        return rc;
    if (!o->model)
        return args_fail(spec, "--model DIR is required");
    if (!o->ids == !o->prompt)
        return args_fail(spec, "give --ids or --prompt (one of them)");
    if (o->sp.top_p <= 0.0f)
        return args_fail(spec, "--top-p: %g out of range (0, 1]", (double)o->sp.top_p);
    if (o->spec > 0 && (o->dump || o->dump_mtp))
        return args_fail(spec, "--speculative-tokens does not go with --dump-logits/--dump-mtp");
    if (strcmp(o->backend, "cpu") != 0)
        return args_fail(spec, "--backend: \"%s\" not available (only cpu)", o->backend);
    return 0;
}

/* "1,2,3" -> malloc'd ids */
static int parse_ids(const char *s, int32_t **ids, int *n)
{
    int cap = 16, k = 0;
    int32_t *v = xmalloc(sizeof(int32_t) * (size_t)cap);
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > INT32_MAX || (*end != ',' && *end != '\0')) {
            free(v);
            return ERR_INVAL;
        }
        if (k == cap)
            v = xrealloc(v, sizeof(int32_t) * (size_t)(cap *= 2));
        v[k++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    *ids = v;
    *n = k;
    return k > 0 ? 0 : ERR_INVAL;
}

static struct tokenizer *load_tokenizer(const char *dir)
{
    char path[4096], err[256];
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    struct tokenizer *tok = tokenizer_create_from_file(path, err, sizeof(err));
    if (!tok)
        fprintf(stderr, "tern generate: cannot load %s: %s\n", path, err);
    return tok;
}

/* The MTP prompt pass over seq[1..n_prompt] (the last = the first sampled token) with the
 * main model's hidden states, in chunks; logits of every position to path. */
static int write_mtp(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                     const int32_t *seq, const float *hid, int n_prompt, int chunk,
                     const char *path)
{
    const int V = m->cfg.vocab_size, H = m->cfg.hidden_size;
    FILE *f = fopen(path, "wb");
    float *lg = malloc(sizeof(float) * (size_t)chunk * (size_t)V);
    int rc = f && lg ? 0 : ERR_IO;
    for (int p = 0; rc == 0 && p < n_prompt; p += chunk) {
        const int n = n_prompt - p < chunk ? n_prompt - p : chunk;
        rc = mtp_run(fc, m, st, seq + p + 1, hid + (size_t)p * (size_t)H, p, n, lg, NULL,
                     FORWARD_LOGITS_ALL);
        if (rc == 0 && fwrite(lg, sizeof(float) * (size_t)V, (size_t)n, f) != (size_t)n)
            rc = ERR_IO;
    }
    if (f && fclose(f) != 0 && rc == 0)
        rc = ERR_IO;
    free(lg);
    if (rc < 0)
        fprintf(stderr, "tern generate: --dump-mtp %s: %s\n", path, err_str(rc));
    return rc;
}

static bool is_eos(const struct model *m, int32_t t)
{
    for (int i = 0; i < m->cfg.n_eos; i++)
        if (m->cfg.eos_ids[i] == t)
            return true;
    return false;
}

/* Speculative generation with K drafts per round (model/spec.h): the prompt in chunks of chunk
 * tokens, then rounds. Prints the tokens as they come, copies them after the prompt in seq and
 * the counters to stderr; *t_pre: the clock after the prefill. Returns the number of tokens
 * generated or a negative status. */
static int generate_spec(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                         const struct gen_opts *o, int K, const int32_t *prompt, int n_prompt,
                         int chunk, int32_t *seq, int ctx, uint64_t *t_pre)
{
    struct spec_dec_opts so;
    spec_dec_opts_default(&so);
    so.k = K;
    so.sp = o->sp;
    so.prefill_chunk = chunk;
    so.prefill_flags = o->recurrent ? FORWARD_GDN_RECURRENT : 0;
    struct spec_dec *d = spec_dec_create(m, fc, st, &so, ctx);
    if (!d)
        return ERR_NOMEM;
    struct sample_rng rng;
    sample_rng_seed(&rng, o->seed);
    int32_t out[FORWARD_SPEC_MAX + 1];
    int n_gen = 0, rc = 0;
    bool stop = o->max_tokens == 0;
    if (!stop) {
        rc = spec_dec_prefill(d, prompt, n_prompt, &rng, &out[0]);
        *t_pre = clock_now_ns();
        if (rc == 0) {
            seq[n_prompt + n_gen++] = out[0];
            printf("%d", out[0]);
            stop = !o->ignore_eos && is_eos(m, out[0]);
        }
    }
    while (rc == 0 && !stop && n_gen < o->max_tokens) {
        int r = spec_dec_step(d, &rng, out);
        if (r < 0) {
            rc = r;
            break;
        }
        for (int j = 0; j < r && !stop && n_gen < o->max_tokens; j++) {
            seq[n_prompt + n_gen++] = out[j];
            printf(" %d", out[j]);
            stop = !o->ignore_eos && is_eos(m, out[j]);
        }
        fflush(stdout);
    }
    char line[512];
    spec_stats_format(spec_dec_stats(d), line, sizeof(line));
    fprintf(stderr, "%s\n", line);
    spec_dec_destroy(d);
    return rc < 0 ? rc : n_gen;
}

int tern_cmd_generate(int argc, char **argv)
{
    struct gen_opts o;
    struct args_spec spec = {"tern generate", "--model DIR (--ids 1,2,3 | --prompt TEXT) [options]",
                             NULL, 0, NOTES};
    int pr = parse_args(&o, argc, argv, &spec);
    if (pr != 0)
        return args_exit(pr);
    struct tokenizer *tok = NULL;
    if (o.prompt || o.print_text) {
        tok = load_tokenizer(o.model);
        if (!tok)
            return 1;
    }
    int32_t *prompt = NULL;
    int n_prompt = 0;
    if (o.ids) {
        if (parse_ids(o.ids, &prompt, &n_prompt) < 0) {
            tokenizer_destroy(tok);
            return args_fail(&spec, "--ids: not a list of token ids: \"%s\"", o.ids);
        }
    } else {
        size_t n = 0;
        if (tokenizer_encode(tok, o.prompt, strlen(o.prompt), &prompt, &n) < 0 || n == 0) {
            free(prompt);
            tokenizer_destroy(tok);
            return args_fail(&spec, "--prompt: the text encodes to no tokens");
        }
        n_prompt = (int)n;
    }

    int rc = 1;
    char err[512] = "";
    struct model *m = NULL;
    struct tpool *tp = NULL;
    struct forward_ctx *fc = NULL;
    struct seq_state *st = NULL;
    struct sample_ctx *sc = NULL;
    float *logits = NULL;
    int32_t *seq = NULL;
    FILE *dump = NULL;
    float *hid = NULL;
    int lr = model_load(&m, o.model, NULL, err, sizeof(err));
    if (lr < 0) {
        fprintf(stderr, "tern generate: load %s: %s (%s)\n", o.model, err, err_str(lr));
        goto out;
    }
    const int V = m->cfg.vocab_size;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= V) {
            rc = args_fail(&spec, "--ids: token id %d out of range [0, %d] (vocab_size of %s)",
                           prompt[i], V - 1, o.model);
            goto out;
        }
    /* speculative tokens: the one line about the head, then K (sampling and the dumps keep
     * the plain path unless K was given explicitly) */
    int K = 0;
    char smsg[512];
    int sr = spec_configure(m, o.spec, &K, smsg, sizeof(smsg));
    fprintf(stderr, "tern generate: %s\n", smsg);
    if (sr < 0)
        goto out;
    if (o.spec < 0 && K > 0 && (o.sp.temperature > 0.0f || o.dump || o.dump_mtp)) {
        fprintf(stderr, "tern generate: speculative decoding off by default with %s "
                        "(--speculative-tokens K turns it on)\n",
                o.sp.temperature > 0.0f ? "sampling" : "--dump-logits/--dump-mtp");
        K = 0;
    }
    const int ctx = n_prompt + o.max_tokens + K + 1;  // a verify window may run past the end
    const int chunk = n_prompt < GEN_PREFILL_MAX ? n_prompt : GEN_PREFILL_MAX;
    tp = tpool_create(o.threads);
    fc = forward_ctx_create(m, chunk > K + 1 ? chunk : K + 1, ctx, tp);
    st = seq_state_create(m, ctx);
    sc = sample_ctx_create(V);
    logits = malloc(sizeof(float) * (size_t)chunk * (size_t)V);
    seq = xmalloc(sizeof(int32_t) * (size_t)ctx);
    if (!tp || !fc || !st || !sc || !logits) {
        fprintf(stderr, "tern generate: out of memory (ctx=%d)\n", ctx);
        goto out;
    }
    if (o.dump_mtp && !m->has_mtp) {
        fprintf(stderr, "tern generate: the checkpoint has no mtp.* tensors\n");
        goto out;
    }
    if (o.dump_mtp)
        hid = xmalloc(sizeof(float) * (size_t)n_prompt * (size_t)m->cfg.hidden_size);
    if (o.dump && !(dump = fopen(o.dump, "wb"))) {
        fprintf(stderr, "tern generate: cannot write %s\n", o.dump);
        goto out;
    }
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)n_prompt);
    const int flags = o.recurrent ? FORWARD_GDN_RECURRENT : 0;
    struct sample_rng rng;
    sample_rng_seed(&rng, o.seed);

    uint64_t t0 = clock_now_ns(), t1 = t0;
    int n_gen = 0;
    if (K > 0) {
        n_gen = generate_spec(fc, m, st, &o, K, prompt, n_prompt, chunk, seq, ctx, &t1);
        if (n_gen < 0) {
            fprintf(stderr, "tern generate: speculative: %s\n", err_str(n_gen));
            goto out;
        }
        goto done;
    }
    for (int p = 0; p < n_prompt; p += chunk) {
        const int n = n_prompt - p < chunk ? n_prompt - p : chunk;
        const int all = dump ? FORWARD_LOGITS_ALL : 0;
        float *h = hid ? hid + (size_t)p * (size_t)m->cfg.hidden_size : NULL;
        int fr = forward_run(fc, m, st, prompt + p, n, logits, h, flags | all);
        if (fr < 0) {
            fprintf(stderr, "tern generate: forward: %s\n", err_str(fr));
            goto out;
        }
        if (dump && fwrite(logits, sizeof(float) * (size_t)V, (size_t)n, dump) != (size_t)n)
            goto out_io;
        if (dump && p + n == n_prompt)  // keep the last row first for sampling
            memmove(logits, logits + (size_t)(n - 1) * V, sizeof(float) * (size_t)V);
    }
    t1 = clock_now_ns();
    for (; n_gen < o.max_tokens; n_gen++) {
        int32_t t = sample_token(sc, &o.sp, logits, seq, n_prompt + n_gen, &rng);
        if (t < 0) {
            fprintf(stderr, "tern generate: bad sampling parameters\n");
            goto out;
        }
        seq[n_prompt + n_gen] = t;
        if (n_gen == 0 && o.dump_mtp &&
            write_mtp(fc, m, st, seq, hid, n_prompt, chunk, o.dump_mtp) < 0)
            goto out;
        printf("%s%d", n_gen ? " " : "", t);
        fflush(stdout);
        if ((!o.ignore_eos && is_eos(m, t)) || n_gen + 1 == o.max_tokens) {
            n_gen++;
            break;
        }
        int fr = forward_run(fc, m, st, &t, 1, logits, NULL, flags);
        if (fr < 0) {
            fprintf(stderr, "tern generate: forward: %s\n", err_str(fr));
            goto out;
        }
        if (dump && fwrite(logits, sizeof(float), (size_t)V, dump) != (size_t)V)
            goto out_io;
    }
done:;
    uint64_t t2 = clock_now_ns();
    printf("\n");
    double pre_s = (double)(t1 - t0) * 1e-9, dec_s = (double)(t2 - t1) * 1e-9;
    fprintf(stderr,
            "prefill_tokens=%d prefill_s=%.3f prefill_tok_s=%.1f decode_tokens=%d decode_s=%.3f "
            "decode_tok_s=%.2f threads=%d\n",
            n_prompt, pre_s, n_prompt / (pre_s > 0 ? pre_s : 1e-9), n_gen, dec_s,
            n_gen > 1 ? (n_gen - 1) / (dec_s > 0 ? dec_s : 1e-9) : 0.0, tpool_size(tp));
    if (o.print_text && tok) {
        char *text = NULL;
        size_t len = 0;
        if (tokenizer_decode(tok, seq + n_prompt, (size_t)n_gen, 0, &text, &len) == 0)
            printf("%s\n", text);
        free(text);
    }
    rc = 0;
    goto out;
out_io:
    fprintf(stderr, "tern generate: write %s failed\n", o.dump);
out:
    if (dump && fclose(dump) != 0 && rc == 0) {
        fprintf(stderr, "tern generate: write %s failed\n", o.dump);
        rc = 1;
    }
    free(seq);
    free(hid);
    free(logits);
    sample_ctx_destroy(sc);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    tpool_destroy(tp);
    model_destroy(m);
    free(prompt);
    tokenizer_destroy(tok);
    return rc;
}
