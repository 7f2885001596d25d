/* wk_spec: speculative rounds, acceptance and counters for the exec thread. */
#include "wk_spec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "model/spec.h"
#include "wk_engine.h"

#define COST_ALPHA 0.2 /* the time averages' weight for a new measurement */
#define ACC_ALPHA 0.25f /* the acceptance average's */

struct wk_spec {
    int k;
    bool sampled; // rounds for temperature > 0 too
    bool gate;    // apply the sequences' gates
    double t_round, t_plain; // ns, moving averages; 0 = not measured yet
    uint32_t V;
    struct wk_spec_counts tot, taken; // totals; totals at the last take
    uint64_t logged_events, logged_ms; // rounds + gated tokens at the last log line, its time
    float *logits; // (k+1, V) window logits
    float *probs;  // (V) acceptance scratch
    int32_t *hist; // (cap_hist) history followed by the drafts
    uint32_t cap_hist;
};

void wk_spec_gate_init(struct wk_spec_gate *g)
{
    memset(g, 0, sizeof *g);
    g->acc = -1.0f;
    g->probe = WK_SPEC_PROBE_MIN;
}

struct wk_spec *wk_spec_create(const struct wk_engine *e, bool sampled, bool gate)
{
    struct wk_spec *s = xcalloc(1, sizeof *s);
    s->sampled = sampled;
    s->gate = gate;
    if (e->ops->spec_window && e->ops->spec_commit && e->info.spec_k > 0)
        s->k = e->info.spec_k > WK_SPEC_MAX ? WK_SPEC_MAX : (int)e->info.spec_k;
    s->V = e->info.vocab_size;
    s->tot.n_pos = s->taken.n_pos = (uint32_t)s->k;
    if (s->k) {
        s->logits = xmalloc(sizeof(float) * (size_t)(s->k + 1) * s->V);
        s->probs = xmalloc(sizeof(float) * s->V);
    }
    return s;
}

void wk_spec_destroy(struct wk_spec *s)
{
    if (!s)
        return;
    free(s->logits);
    free(s->probs);
    free(s->hist);
    free(s);
}

int wk_spec_k(const struct wk_spec *s)
{
    return s->k;
}

/* Do this sequence's rounds pay? Unknown (no round or no times yet) counts as yes. */
static bool gate_pays(const struct wk_spec *s, const struct wk_spec_gate *g)
{
    if (g->acc < 0.0f || s->t_round <= 0.0 || s->t_plain <= 0.0)
        return true;
    return (1.0 + (double)g->acc) * s->t_plain >= s->t_round;
}

int wk_spec_round_k(struct wk_spec *s, struct wk_spec_gate *g, const struct sample_params *sp,
                    uint32_t pos, uint32_t left, uint64_t cap)
{
    if (!s->k || (sp->temperature > 0.0f && !s->sampled) || left < 2 || cap < (uint64_t)pos + 2)
        return 0;
    uint64_t k = (uint64_t)s->k;
    if (k > left - 1)
        k = left - 1;
    if (k > cap - pos - 1)
        k = cap - pos - 1;
    if (!s->gate || !g)
        return (int)k;
    if (s->t_plain <= 0.0 && g->acc >= 0.0f) {
        /* no plain decode step timed yet (every sequence speculating leaves none): every other
         * token of this sequence plain until one is (g->plain is free while the gate is open) */
        g->plain = !g->plain;
        if (g->plain)
            return 0;
    }
    if (gate_pays(s, g)) {
        g->closed = false;
        g->probe = WK_SPEC_PROBE_MIN;
        return (int)k;
    }
    if (!g->closed) {
        g->closed = true;
        g->plain = 0;
        g->probe = WK_SPEC_PROBE_MIN;
    }
    if (g->plain >= g->probe) { /* a probe round: does it pay again? */
        g->plain = 0;
        g->probe = g->probe * 2 < WK_SPEC_PROBE_MAX ? g->probe * 2 : WK_SPEC_PROBE_MAX;
        s->tot.probes++;
        return (int)k;
    }
    g->plain++;
    s->tot.gated++;
    return 0;
}

void wk_spec_gate_note(struct wk_spec_gate *g, int n)
{
    if (n < 1)
        return;
    const float a = (float)(n - 1);
    g->acc = g->acc < 0.0f ? a : g->acc + ACC_ALPHA * (a - g->acc);
}

void wk_spec_cost(struct wk_spec *s, bool round, uint64_t ns)
{
    double *t = round ? &s->t_round : &s->t_plain;
    *t = *t <= 0.0 ? (double)ns : *t + COST_ALPHA * ((double)ns - *t);
}

int wk_spec_round(struct wk_spec *s, struct wk_engine *e, uint32_t slot, uint32_t pos, uint32_t x,
                  int k, const uint32_t *blocks, uint32_t n_blocks, struct sample_ctx *sc,
                  const struct sample_params *sp, const int32_t *hist, uint32_t n_hist,
                  struct sample_rng *rng, const struct spec_hook *hook, uint32_t *out,
                  const float **rows)
{
    int32_t drafts[WK_SPEC_MAX], emitted[WK_SPEC_MAX + 1];
    if (k < 1 || k > s->k || n_hist < 1 || (uint32_t)hist[n_hist - 1] != x)
        return ERR_INVAL;
    if (n_hist + (uint32_t)k > s->cap_hist) {
        s->cap_hist = n_hist + (uint32_t)k + 256;
        s->hist = xrealloc(s->hist, sizeof(int32_t) * s->cap_hist);
    }
    int rc = e->ops->spec_window(e, slot, pos, x, k, blocks, n_blocks, drafts, s->logits);
    if (rc < 0)
        return rc;
    // the acceptance rule sees the history followed by the drafts (its penalties look at them)
    memcpy(s->hist, hist, sizeof(int32_t) * n_hist);
    memcpy(s->hist + n_hist, drafts, sizeof(int32_t) * (size_t)k);
    int r = spec_accept_hooked(sc, sp, s->logits, (int)s->V, drafts, k, s->hist, (int)n_hist,
                               rng, s->probs, emitted, hook);
    if (r < 1 || r > k + 1) {
        int rr = e->ops->spec_commit(e, slot, 0); // close the window; the sequence fails anyway
        (void)rr;
        return r < 0 ? r : ERR_STATE;
    }
    rc = e->ops->spec_commit(e, slot, r - 1);
    if (rc < 0)
        return rc;
    for (int i = 0; i < r; i++) {
        if (emitted[i] < 0 || (uint32_t)emitted[i] >= s->V)
            return ERR_INVAL;
        out[i] = (uint32_t)emitted[i];
    }
    s->tot.drafts++;
    s->tot.draft_tokens += (uint64_t)k;
    s->tot.accepted += (uint64_t)(r - 1);
    for (int i = 0; i < r - 1; i++)
        s->tot.per_pos[i]++;
    *rows = s->logits;
    return r;
}

void wk_spec_take(struct wk_spec *s, struct wk_spec_counts *d)
{
    memset(d, 0, sizeof *d);
    d->n_pos = s->tot.n_pos;
    d->gated = s->tot.gated - s->taken.gated;
    d->probes = s->tot.probes - s->taken.probes;
    d->drafts = s->tot.drafts - s->taken.drafts;
    d->draft_tokens = s->tot.draft_tokens - s->taken.draft_tokens;
    d->accepted = s->tot.accepted - s->taken.accepted;
    for (int i = 0; i < WK_SPEC_MAX; i++)
        d->per_pos[i] = s->tot.per_pos[i] - s->taken.per_pos[i];
    s->taken = s->tot;
}

void wk_spec_totals(const struct wk_spec *s, struct wk_spec_counts *out)
{
    *out = s->tot;
}

double wk_spec_mean_len(const struct wk_spec_counts *c)
{
    return c->drafts ? 1.0 + (double)c->accepted / (double)c->drafts : 0.0;
}

void wk_spec_log(struct wk_spec *s, uint64_t now_ms, uint64_t period_ms, bool force)
{
    if (!s->k)
        return;
    const uint64_t events = s->tot.drafts + s->tot.gated;
    if (!force && (events == s->logged_events || now_ms - s->logged_ms < period_ms))
        return;
    char at[WK_SPEC_MAX * 24 + 1] = "";
    size_t o = 0;
    for (int i = 0; i < s->k && o < sizeof at; i++)
        o += (size_t)snprintf(at + o, sizeof at - o, "%s%" PRIu64, i ? "," : "", s->tot.per_pos[i]);
    const struct wk_spec_counts *t = &s->tot;
    LOG_INFO("spec_stats",
             "k=%d drafts=%" PRIu64 " draft_tokens=%" PRIu64 " accepted=%" PRIu64
             " acceptance=%.4f mean_accepted_len=%.3f accepted_per_pos=%s gate=%s"
             " gated_tokens=%" PRIu64 " probes=%" PRIu64 " round_ms=%.3f plain_step_ms=%.3f",
             s->k, t->drafts, t->draft_tokens, t->accepted,
             t->draft_tokens ? (double)t->accepted / (double)t->draft_tokens : 0.0,
             wk_spec_mean_len(t), at, s->gate ? "on" : "off", t->gated, t->probes,
             s->t_round * 1e-6, s->t_plain * 1e-6);
    s->logged_events = events;
    s->logged_ms = now_ms;
}
