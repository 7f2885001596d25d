/* tern generate: load a checkpoint and generate tokens with the CPU reference forward pass
 * (model/forward.h) and the sampler (model/sample.h). Prints the generated ids on stdout and
 * timing on stderr; --dump-logits writes the logits of every position as raw fp32. With an MTP
 * head, speculative decoding (model/spec.h) drafts K tokens per round and verifies them in one
 * forward pass; the output is the same as without it (identical at temperature 0, the same
 * distribution when sampling). */
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

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tern generate --model DIR (--ids 1,2,3 | --prompt TEXT) [options]\n"
            "  --max-tokens N      tokens to generate (16)\n"
            "  --temperature T     0 = greedy (0)\n"
            "  --top-p P --top-k K --min-p P   truncation (off)\n"
            "  --seed S            sampler seed (0)\n"
            "  --backend cpu       only the CPU reference exists here\n"
            "  --threads N         CPU threads, 0 = all (0)\n"
            "  --ignore-eos        do not stop at the config's eos ids\n"
            "  --recurrent         GDN by the per-token recurrence also in prefill (testing)\n"
            "  --print-text        also print the decoded text (needs tokenizer.json)\n"
            "  --dump-logits FILE  raw little-endian fp32 logits, one row of V per position of\n"
            "                      the final sequence except the last: prompt rows first\n"
            "                      (n_prompt + n_generated - 1 rows)\n"
            "  --speculative-tokens K   MTP speculative decoding with K drafts per round\n"
            "                      (alias --spec K; 0 = off). Default: 3 at temperature 0 when\n"
            "                      the checkpoint has mtp.* tensors, else off; sampling\n"
            "                      (--temperature > 0) speculates only when K is given, so\n"
            "                      seeded runs print what plain sampling prints unless asked\n"
            "  --dump-mtp FILE     raw fp32 MTP logits of the prompt pass (MODEL.md 6.4): row p\n"
            "                      from (token p+1, hidden p), the last with the first sampled\n"
            "                      token (n_prompt rows; needs mtp.* tensors)\n");
}

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
    int ignore_eos;
    int recurrent;
    int print_text;
    int spec;                  // -1: default (spec_configure)
    struct sample_params sp;
};

static int parse_args(struct gen_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->max_tokens = 16;
    o->spec = -1;
    o->backend = "cpu";
    sample_params_default(&o->sp);
    o->sp.temperature = 0.0f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (strcmp(a, "--ignore-eos") == 0)
            o->ignore_eos = 1, used = 0;
        else if (strcmp(a, "--recurrent") == 0)
            o->recurrent = 1, used = 0;
        else if (strcmp(a, "--print-text") == 0)
            o->print_text = 1, used = 0;
        else if (!v)
            return ERR_INVAL;
        else if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--ids") == 0)
            o->ids = v;
        else if (strcmp(a, "--prompt") == 0)
            o->prompt = v;
        else if (strcmp(a, "--dump-logits") == 0)
            o->dump = v;
        else if (strcmp(a, "--dump-mtp") == 0)
            o->dump_mtp = v;
        else if (strcmp(a, "--backend") == 0)
            o->backend = v;
        else if (strcmp(a, "--max-tokens") == 0)
            o->max_tokens = atoi(v);
        else if (strcmp(a, "--spec") == 0 || strcmp(a, "--speculative-tokens") == 0)
            o->spec = atoi(v);
        else if (strcmp(a, "--threads") == 0)
            o->threads = atoi(v);
        else if (strcmp(a, "--seed") == 0)
            o->seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--temperature") == 0)
            o->sp.temperature = strtof(v, NULL);
        else if (strcmp(a, "--top-p") == 0)
            o->sp.top_p = strtof(v, NULL);
        else if (strcmp(a, "--top-k") == 0)
            o->sp.top_k = atoi(v);
        else if (strcmp(a, "--min-p") == 0)
            o->sp.min_p = strtof(v, NULL);
        else
            return ERR_INVAL;
        i += used;
    }
    if (!o->model || (!o->ids == !o->prompt) || o->max_tokens < 0 || o->threads < 0)
        return ERR_INVAL;
    if (o->spec < -1 || o->spec > FORWARD_SPEC_MAX || (o->spec > 0 && (o->dump || o->dump_mtp)))
        return ERR_INVAL;
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
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
    if (parse_args(&o, argc, argv) < 0) {
        usage(stderr);
        return 2;
    }
    if (strcmp(o.backend, "cpu") != 0) {
        fprintf(stderr, "tern generate: backend '%s' not available (only cpu)\n", o.backend);
        return 2;
    }
    struct tokenizer *tok = NULL;
    if (o.prompt || o.print_text) {
        tok = load_tokenizer(o.model);
        if (!tok)
            return 2;
    }
    int32_t *prompt = NULL;
    int n_prompt = 0;
    if (o.ids) {
        if (parse_ids(o.ids, &prompt, &n_prompt) < 0) {
            fprintf(stderr, "tern generate: bad --ids '%s'\n", o.ids);
            tokenizer_destroy(tok);
            return 2;
        }
    } else {
        size_t n = 0;
        if (tokenizer_encode(tok, o.prompt, strlen(o.prompt), &prompt, &n) < 0 || n == 0) {
            fprintf(stderr, "tern generate: the prompt encodes to no tokens\n");
            free(prompt);
            tokenizer_destroy(tok);
            return 2;
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
