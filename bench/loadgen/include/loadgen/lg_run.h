/* lg_run: one benchmark point. Builds synthetic prompts of an exact token count, sends streamed
 * requests (closed loop at a fixed concurrency, or Poisson arrivals at a rate with an optional
 * concurrency cap) and summarises what the SSE streams showed. */
#ifndef LOADGEN_LG_RUN_H
#define LOADGEN_LG_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "loadgen/lg_http.h"
#include "loadgen/lg_stats.h"

enum lg_endpoint { LG_ENDPOINT_COMPLETIONS, LG_ENDPOINT_CHAT };

/* Completions prompts are lists of token ids drawn from [LG_TOKEN_LO, LG_TOKEN_HI): ordinary
 * tokens of the Qwen vocabulary, no specials. */
#define LG_TOKEN_LO 1000
#define LG_TOKEN_HI 60000
/* At most this many distinct prompts are prepared for a run bounded by time only. */
#define LG_PROMPT_POOL_MAX 512

struct lg_cfg {
    struct lg_url url;
    char model[256]; /* "" = do not send "model" */
    enum lg_endpoint endpoint;
    int prompt_len;     /* tokens, >= 1 */
    int output_len;     /* max_tokens, >= 1 */
    int concurrency;    /* max requests in flight; 0 = unbounded (only with rate > 0) */
    double rate;        /* requests/s (Poisson); 0 = closed loop at concurrency */
    int requests;       /* 0 = until duration_s */
    double duration_s;  /* 0 = until requests */
    double temperature; /* < 0 = not sent */
    bool ignore_eos;
    uint64_t seed;
    int timeout_ms; /* per request, 0 = none */
};

struct lg_result {
    int requests, completed, failed;
    char first_error[256];
    double duration_s;                      /* first send to last completion */
    long long prompt_tokens, output_tokens; /* completed requests, from usage */
    int prompt_len_min, prompt_len_max;     /* actual prompt tokens seen (usage) */
    double req_per_s, output_tok_per_s, total_tok_per_s;
    struct stats_dist ttft_ms, itl_ms, tpot_ms, e2e_ms; /* itl: per chunk / tokens per chunk */
    struct stats_dist decode_tok_s;                     /* per stream: (output - 1) / (e2e - ttft) */
    struct stats_dist prefill_tok_s;                    /* per request: prompt tokens / ttft */
};

/* Run one point. Returns 0 when the run took place (requests may have failed: see r->failed),
 * or a negative status with err set when it could not (bad config, prompt preparation
 * failed, server unreachable). */
int lg_run(const struct lg_cfg *c, struct lg_result *r, char *err, size_t errlen);

#endif
