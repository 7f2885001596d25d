/* wk_spec: a scripted engine (spec_window proposes fixed drafts and writes logits whose argmax
 * is a fixed "target" token per window row; spec_commit records a) checks the round sizing
 * against the grant and the KV room, the greedy acceptance (accepted drafts, then the target's
 * correction or bonus), the commit count, the counters and their per-step deltas. */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "model/sample.h"
#include "test.h"
#include "wk_engine.h"
#include "wk_spec.h"

#define V 32

struct script {
    int32_t drafts[4];
    int32_t target[5]; // argmax of window row i
    int last_a;        // a given to spec_commit, -1 = none
    int windows;
};

static struct script g_s; /* the engine's impl points here */

static int s_window(struct wk_engine *e, uint32_t slot, uint32_t pos, uint32_t x, int k,
                    const uint32_t *blocks, uint32_t n_blocks, int32_t *drafts, float *logits)
{
    struct script *s = e->impl;
    (void)blocks;
    (void)n_blocks;
    (void)slot;
    (void)pos;
    (void)x;
    s->windows++;
    for (int i = 0; i < k; i++)
        drafts[i] = s->drafts[i];
    for (int i = 0; i <= k; i++) {
        for (int v = 0; v < V; v++)
            logits[i * V + v] = 0.0f;
        logits[i * V + s->target[i]] = 5.0f;
    }
    return 0;
}

static int s_commit(struct wk_engine *e, uint32_t slot, int a)
{
    struct script *s = e->impl;
    (void)slot;
    s->last_a = a;
    return 0;
}

static const struct wk_engine_ops OPS = {.spec_window = s_window, .spec_commit = s_commit};
static const struct wk_engine_ops NO_OPS = {0};

int main(void)
{
    struct wk_engine e;
    memset(&e, 0, sizeof e);
    e.ops = &OPS;
    e.impl = &g_s;
    e.info.vocab_size = V;
    e.info.spec_k = 3;
    struct sample_params greedy, hot;
    sample_params_default(&greedy);
    greedy.temperature = 0.0f;
    sample_params_default(&hot);
    hot.temperature = 0.8f;

    /* sizing: K, the grant (left - 1) and the KV room (cap - pos - 1) */
    struct wk_spec *s = wk_spec_create(&e, false, true);
    CHECK_EQ_INT(wk_spec_k(s), 3);
    CHECK_EQ_INT(wk_spec_round_k(s, NULL, &greedy, 10, 8, 100), 3);
    CHECK_EQ_INT(wk_spec_round_k(s, NULL, &greedy, 10, 3, 100), 2);
    CHECK_EQ_INT(wk_spec_round_k(s, NULL, &greedy, 10, 1, 100), 0);
    CHECK_EQ_INT(wk_spec_round_k(s, NULL, &greedy, 10, 8, 13), 2); // positions 10..12 fit
    CHECK_EQ_INT(wk_spec_round_k(s, NULL, &greedy, 10, 8, 11), 0); // only the fed token fits
    CHECK_EQ_INT(wk_spec_round_k(s, NULL, &hot, 10, 8, 100), 0);   // sampled: not unless asked
    struct wk_spec *s2 = wk_spec_create(&e, true, true);
    CHECK_EQ_INT(wk_spec_round_k(s2, NULL, &hot, 10, 8, 100), 3);
    wk_spec_destroy(s2);
    struct wk_engine plain = e;
    plain.ops = &NO_OPS;
    s2 = wk_spec_create(&plain, true, true);
    CHECK_EQ_INT(wk_spec_k(s2), 0);
    CHECK_EQ_INT(wk_spec_round_k(s2, NULL, &greedy, 10, 8, 100), 0);
    wk_spec_destroy(s2);

    struct sample_ctx *sc = sample_ctx_create(V);
    struct sample_rng rng;
    sample_rng_seed(&rng, 1);
    int32_t hist[4] = {1, 2, 3, 7}; // ends with x = 7
    uint32_t out[4];
    const float *rows = NULL;

    /* two drafts accepted, the third rejected: emits d1 d2 and the correction */
    memcpy(g_s.drafts, (int32_t[]){10, 11, 12}, sizeof(int32_t) * 3);
    memcpy(g_s.target, (int32_t[]){10, 11, 20, 21}, sizeof(int32_t) * 4);
    g_s.last_a = -1;
    int r = wk_spec_round(s, &e, 0, 4, 7, 3, NULL, 0, sc, &greedy, hist, 4, &rng, NULL, out, &rows);
    CHECK_EQ_INT(r, 3);
    CHECK(out[0] == 10 && out[1] == 11 && out[2] == 20);
    CHECK_EQ_INT(g_s.last_a, 2);
    CHECK(rows != NULL);

    /* all accepted: the bonus from the last row */
    memcpy(g_s.target, (int32_t[]){10, 11, 12, 25}, sizeof(int32_t) * 4);
    r = wk_spec_round(s, &e, 0, 4, 7, 3, NULL, 0, sc, &greedy, hist, 4, &rng, NULL, out, &rows);
    CHECK_EQ_INT(r, 4);
    CHECK(out[0] == 10 && out[1] == 11 && out[2] == 12 && out[3] == 25);
    CHECK_EQ_INT(g_s.last_a, 3);

    struct wk_spec_counts d;
    wk_spec_take(s, &d);
    CHECK(d.drafts == 2 && d.draft_tokens == 6 && d.accepted == 5 && d.n_pos == 3);
    CHECK(d.per_pos[0] == 2 && d.per_pos[1] == 2 && d.per_pos[2] == 1);

    /* the first draft rejected, k = 1: one token, the correction */
    memcpy(g_s.target, (int32_t[]){30, 11}, sizeof(int32_t) * 2);
    r = wk_spec_round(s, &e, 0, 4, 7, 1, NULL, 0, sc, &greedy, hist, 4, &rng, NULL, out, &rows);
    CHECK_EQ_INT(r, 1);
    CHECK(out[0] == 30);
    CHECK_EQ_INT(g_s.last_a, 0);
    wk_spec_take(s, &d); // only what happened since the last take
    CHECK(d.drafts == 1 && d.draft_tokens == 1 && d.accepted == 0 && d.per_pos[0] == 0);
    struct wk_spec_counts t;
    wk_spec_totals(s, &t);
    CHECK(t.drafts == 3 && t.draft_tokens == 7 && t.accepted == 5);
    CHECK_NEAR(wk_spec_mean_len(&t), 1.0 + 5.0 / 3.0, 1e-9);

    /* refused: k above K, a history that does not end with x */
    int before = g_s.windows;
    CHECK(wk_spec_round(s, &e, 0, 4, 7, 4, NULL, 0, sc, &greedy, hist, 4, &rng, NULL, out, &rows) < 0);
    CHECK(wk_spec_round(s, &e, 0, 4, 8, 2, NULL, 0, sc, &greedy, hist, 4, &rng, NULL, out, &rows) < 0);
    CHECK_EQ_INT(g_s.windows, before);

    /* the gate: open while unknown; closed while (1 + accepted) x plain step < round */
    struct wk_spec_gate g;
    wk_spec_gate_init(&g);
    struct wk_spec *gs = wk_spec_create(&e, false, true);
    CHECK_EQ_INT(wk_spec_round_k(gs, &g, &greedy, 10, 8, 100), 3); // nothing measured
    wk_spec_gate_note(&g, 1);                                       // no draft accepted
    /* no plain step timed yet: every other token plain until one is */
    CHECK_EQ_INT(wk_spec_round_k(gs, &g, &greedy, 10, 8, 100), 0);
    CHECK_EQ_INT(wk_spec_round_k(gs, &g, &greedy, 10, 8, 100), 3);
    CHECK_EQ_INT(wk_spec_round_k(gs, &g, &greedy, 10, 8, 100), 0);
    wk_spec_cost(gs, true, 1800000);  // a round: 1.8 ms
    wk_spec_cost(gs, false, 1000000); // a plain step: 1.0 ms
    /* 1 token a round at 1.8 ms against 1 at 1.0 ms: plain, WK_SPEC_PROBE_MIN times, then a
     * probe round, then twice as many plain tokens before the next */
    int n_plain = 0, round = 0;
    for (int i = 0; i < WK_SPEC_PROBE_MIN; i++)
        n_plain += wk_spec_round_k(gs, &g, &greedy, 10, 8, 100) == 0;
    CHECK_EQ_INT(n_plain, WK_SPEC_PROBE_MIN);
    CHECK(g.closed);
    CHECK_EQ_INT(wk_spec_round_k(gs, &g, &greedy, 10, 8, 100), 3); // the probe
    for (int i = 0; i < 2 * WK_SPEC_PROBE_MIN; i++)
        round += wk_spec_round_k(gs, &g, &greedy, 10, 8, 100) != 0;
    CHECK_EQ_INT(round, 0);
    CHECK_EQ_INT(wk_spec_round_k(gs, &g, &greedy, 10, 8, 100), 3); // the second probe
    /* the probes accept drafts again: 1 + 2.4 > 1.8 opens the gate */
    for (int i = 0; i < 8; i++)
        wk_spec_gate_note(&g, 4);
    CHECK(g.acc > 2.4f);
    CHECK_EQ_INT(wk_spec_round_k(gs, &g, &greedy, 10, 8, 100), 3);
    CHECK(!g.closed);
    CHECK_EQ_INT(wk_spec_round_k(gs, &g, &greedy, 10, 8, 100), 3);
    struct wk_spec_counts gc;
    wk_spec_take(gs, &gc);
    CHECK(gc.gated == 3 * WK_SPEC_PROBE_MIN && gc.probes == 2);
    /* the probe interval stops doubling at WK_SPEC_PROBE_MAX */
    struct wk_spec_gate h;
    wk_spec_gate_init(&h);
    wk_spec_gate_note(&h, 1);
    int n_probes = 0, since = 0, longest = 0;
    for (int i = 0; i < 4000; i++) {
        if (wk_spec_round_k(gs, &h, &greedy, 10, 8, 100)) {
            n_probes++;
            longest = since > longest ? since : longest;
            since = 0;
        } else {
            since++;
        }
    }
    CHECK_EQ_INT(longest, WK_SPEC_PROBE_MAX);
    CHECK(n_probes >= 12 && n_probes <= 20);
    /* gate off: every round at K */
    struct wk_spec *ng = wk_spec_create(&e, false, false);
    wk_spec_cost(ng, true, 1800000);
    wk_spec_cost(ng, false, 1000000);
    CHECK_EQ_INT(wk_spec_round_k(ng, &h, &greedy, 10, 8, 100), 3);
    wk_spec_destroy(ng);
    wk_spec_destroy(gs);

    sample_ctx_destroy(sc);
    wk_spec_destroy(s);
    return test_result();
}
