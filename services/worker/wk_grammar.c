/* wk_grammar: see wk_grammar.h. */
#include "wk_grammar.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "text/grammar.h"
#include "text/grammar_tools.h"
#include "text/rawmask.h"
#include "text/tokenizer.h"
#include "text/tokmask.h"

struct wk_grammar {
    char model_dir[512];
    uint32_t vocab;
    struct tokmask *tm; // NULL until the first grammar sequence
    struct rawmask *rm; // the same vocabulary, for raw text values of tool calls
    bool load_failed;   // tokenizer.json missing or bad: not tried again
    uint32_t *mask;     // (TOKMASK_WORDS(vocab))
};

struct wk_gseq {
    struct grammar *g;
    struct grammar_state st;
    uint32_t replay; // completion tokens at the end of the prefill still to advance over
};

struct wk_grammar *wk_grammar_create(const char *model_dir, uint32_t vocab)
{
    struct wk_grammar *wg = xcalloc(1, sizeof(*wg));
    snprintf(wg->model_dir, sizeof(wg->model_dir), "%s", model_dir ? model_dir : "");
    wg->vocab = vocab;
    wg->mask = xcalloc(TOKMASK_WORDS(vocab), sizeof(uint32_t));
    return wg;
}

void wk_grammar_destroy(struct wk_grammar *wg)
{
    if (!wg)
        return;
    tokmask_destroy(wg->tm);
    rawmask_destroy(wg->rm);
    free(wg->mask);
    free(wg);
}

/* The grammar vocabulary (tokmask_grammar_vocab) behind both masks. */
static void masks_create(struct wk_grammar *wg, const struct tokenizer *tok, int n_vocab)
{
    const char **bytes;
    size_t *lens;
    tokmask_grammar_vocab(tok, n_vocab, &bytes, &lens);
    wg->tm = tokmask_create(n_vocab, bytes, lens);
    wg->rm = rawmask_create(n_vocab, bytes, lens);
    free(bytes);
    free(lens);
}

static int load_vocab(struct wk_grammar *wg)
{
    if (wg->tm)
        return 0;
    if (wg->load_failed || !wg->model_dir[0])
        return ERR_NOTFOUND;
    char path[600], why[200];
    snprintf(path, sizeof(path), "%s/tokenizer.json", wg->model_dir);
    uint64_t t0 = clock_now_ms();
    struct tokenizer *tok = tokenizer_create_from_file(path, why, sizeof(why));
    if (!tok) {
        wg->load_failed = true;
        LOG_ERR("grammar_vocab_failed", "path=%s msg=\"%s\"", path, why);
        return ERR_NOTFOUND;
    }
    masks_create(wg, tok, (int)wg->vocab);
    tokenizer_destroy(tok);
    LOG_INFO("grammar_vocab_loaded", "path=%s vocab=%u ms=%" PRIu64, path, wg->vocab,
             clock_now_ms() - t0);
    return 0;
}

struct wk_gseq *wk_gseq_create(struct wk_grammar *wg, const char *schema, uint32_t replay,
                               const char **msg)
{
    if (load_vocab(wg) < 0) {
        *msg = "constrained decoding needs tokenizer.json in the model directory";
        return NULL;
    }
    struct grammar *g = grammar_compile_any(schema, strlen(schema), NULL, 0);
    if (!g) {
        *msg = "json_schema does not compile";
        return NULL;
    }
    struct wk_gseq *gs = xcalloc(1, sizeof(*gs));
    gs->g = g;
    grammar_state_init(&gs->st, g);
    gs->replay = replay;
    return gs;
}

void wk_gseq_destroy(struct wk_gseq *gs)
{
    if (!gs)
        return;
    grammar_destroy(gs->g);
    free(gs);
}

int wk_grammar_mask(struct wk_grammar *wg, struct wk_gseq *gs, const int32_t *hist, uint32_t n_hist,
                    const uint32_t *stop_ids, uint32_t n_stop, const uint32_t **allow,
                    const char **msg)
{
    if (gs->replay) {
        uint32_t n = gs->replay < n_hist ? gs->replay : n_hist;
        for (uint32_t i = n_hist - n; i < n_hist; i++)
            if (!tokmask_advance(wg->tm, gs->g, &gs->st, hist[i])) {
                *msg = "a resumed completion token does not fit the json_schema";
                return ERR_STATE;
            }
        gs->replay = 0;
    }
    int n = grammar_in_raw(&gs->st, gs->g) ? rawmask_compute(wg->rm, gs->g, &gs->st, wg->mask)
                                           : tokmask_compute(wg->tm, gs->g, &gs->st, wg->mask);
    if (grammar_is_accepting(&gs->st, gs->g))
        for (uint32_t i = 0; i < n_stop; i++)
            if (stop_ids[i] < wg->vocab &&
                !(wg->mask[stop_ids[i] >> 5] >> (stop_ids[i] & 31) & 1)) {
                wg->mask[stop_ids[i] >> 5] |= 1u << (stop_ids[i] & 31);
                n++;
            }
    if (n == 0) {
        *msg = "json_schema: no token can continue the output";
        return ERR_STATE;
    }
    *allow = wg->mask;
    return 0;
}

int wk_grammar_accept(struct wk_grammar *wg, struct wk_gseq *gs, int32_t tok, bool is_stop)
{
    if (is_stop && grammar_is_accepting(&gs->st, gs->g))
        return 0;
    return tokmask_advance(wg->tm, gs->g, &gs->st, tok) ? 0 : ERR_STATE;
}
