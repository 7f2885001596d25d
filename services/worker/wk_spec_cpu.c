/* wk_spec_cpu: per-slot MTP bookkeeping and the verify window for the CPU engine. */
#include "wk_spec_cpu.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "model/forward.h"
#include "model/forward_spec.h"
#include "model/model.h"
#include "model/mtp.h"
#include "model/spec.h"
#include "model/state.h"

/* MTP entries of one slot: (token after position p, hidden at p) not yet run, positions
 * pos0 .. pos0+n-1 (contiguous), and the hidden of the last run position whose next token is
 * still unknown (it arrives as the first token of the next forward or window). */
struct slot {
    bool have_h;
    float *h_last; // (H) final-normed hidden at st->pos - 1
    int32_t *tok;  // (cap) pending entries
    float *hid;    // (cap, H)
    int pos0, n;
};

struct wk_spec_cpu {
    const struct model *m;
    struct forward_ctx *fc;
    uint32_t n_slots;
    int k, cap, H;
    struct slot *sl;
    float *hbig; // (max_step_tokens, H) hidden states of a plain forward
    float *hwin; // (k+1, H) hidden states of the window
    float *hbuf; // (k+1, H) MTP scratch
    float *lgv;  // (V) MTP draft logits
    struct seq_snapshot *sn;
    int win_slot; // slot of the open window, -1 = none
    int win_pos;  // its first position
    int32_t win_x;
    int32_t win_d[FORWARD_SPEC_MAX];
    int win_k;
};

int wk_spec_cpu_configure(const struct model *m, int requested, int *k)
{
    char msg[512];
    int rc = spec_configure(m, requested, k, msg, sizeof msg);
    if (rc < 0) {
        LOG_ERR("spec_config_refused", "requested=%d err=%s msg=\"%s\"", requested, err_str(rc),
                msg);
        fprintf(stderr, "tern-worker: %s\n", msg);
        return rc;
    }
    LOG_INFO("spec_config", "requested=%d k=%d head_bytes=%lld msg=\"%s\"", requested, *k,
             (long long)spec_head_bytes(m), msg);
    return 0;
}

void wk_spec_cpu_destroy(struct wk_spec_cpu *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; s->sl && i < s->n_slots; i++) {
        free(s->sl[i].h_last);
        free(s->sl[i].tok);
        free(s->sl[i].hid);
    }
    free(s->sl);
    free(s->hbig);
    free(s->hwin);
    free(s->hbuf);
    free(s->lgv);
    seq_snapshot_destroy(s->sn);
    free(s);
}

struct wk_spec_cpu *wk_spec_cpu_create(const struct model *m, struct forward_ctx *fc,
                                       uint32_t n_slots, int k, int max_step_tokens)
{
    if (!m->has_mtp || k < 1 || k > FORWARD_SPEC_MAX || max_step_tokens < k + 1 || !n_slots)
        return NULL;
    struct wk_spec_cpu *s = xcalloc(1, sizeof *s);
    const int H = m->cfg.hidden_size;
    s->m = m;
    s->fc = fc;
    s->n_slots = n_slots;
    s->k = k;
    s->cap = k + 1;
    s->H = H;
    s->win_slot = -1;
    s->sl = xcalloc(n_slots, sizeof *s->sl);
    for (uint32_t i = 0; i < n_slots; i++) {
        s->sl[i].h_last = xmalloc(sizeof(float) * (size_t)H);
        s->sl[i].tok = xmalloc(sizeof(int32_t) * (size_t)s->cap);
        s->sl[i].hid = xmalloc(sizeof(float) * (size_t)s->cap * (size_t)H);
    }
    s->hbig = xmalloc(sizeof(float) * (size_t)max_step_tokens * (size_t)H);
    s->hwin = xmalloc(sizeof(float) * (size_t)(k + 1) * (size_t)H);
    s->hbuf = xmalloc(sizeof(float) * (size_t)(k + 1) * (size_t)H);
    s->lgv = xmalloc(sizeof(float) * (size_t)m->cfg.vocab_size);
    return s;
}

void wk_spec_cpu_reset(struct wk_spec_cpu *s, uint32_t slot)
{
    if (slot >= s->n_slots)
        return;
    s->sl[slot].have_h = false;
    s->sl[slot].n = 0;
    if (s->win_slot == (int)slot)
        s->win_slot = -1;
}

/* Run the pending entries through the MTP head (writes their MTP K/V). */
static int flush(struct wk_spec_cpu *s, struct slot *q, struct seq_state *st)
{
    if (!q->n)
        return 0;
    int rc = mtp_run(s->fc, s->m, st, q->tok, q->hid, q->pos0, q->n, NULL, NULL, 0);
    q->n = 0;
    return rc;
}

/* The entry (tok after position p, h_last) joins the pending ones; p = st->pos - 1 before the
 * forward that runs tok. */
static int push_last(struct wk_spec_cpu *s, struct slot *q, struct seq_state *st, int32_t tok)
{
    if (!q->have_h)
        return 0;
    const int p = st->pos - 1;
    if (q->n && (q->n == s->cap || q->pos0 + q->n != p)) {
        int rc = flush(s, q, st);
        if (rc < 0)
            return rc;
    }
    if (!q->n)
        q->pos0 = p;
    q->tok[q->n] = tok;
    memcpy(q->hid + (size_t)q->n * (size_t)s->H, q->h_last, sizeof(float) * (size_t)s->H);
    q->n++;
    q->have_h = false;
    return 0;
}

int wk_spec_cpu_forward(struct wk_spec_cpu *s, uint32_t slot, struct seq_state *st,
                        const int32_t *tok, int n, float *logits)
{
    if (slot >= s->n_slots || n < 1)
        return ERR_INVAL;
    struct slot *q = &s->sl[slot];
    if (s->win_slot == (int)slot)
        return ERR_STATE; // a window waits for its commit
    const int p = st->pos;
    int rc = push_last(s, q, st, tok[0]); // p-1's next token is tok[0]
    if (rc == 0)
        rc = forward_run(s->fc, s->m, st, tok, n, logits, s->hbig, 0);
    if (rc < 0)
        return rc;
    if (n > 1 || q->n == s->cap)
        rc = flush(s, q, st); // entries below p first: the chunk's queries attend to them
    if (rc == 0 && n > 1)
        rc = mtp_run(s->fc, s->m, st, tok + 1, s->hbig, p, n - 1, NULL, NULL, 0);
    memcpy(q->h_last, s->hbig + (size_t)(n - 1) * (size_t)s->H, sizeof(float) * (size_t)s->H);
    q->have_h = true;
    return rc;
}

int wk_spec_cpu_window(struct wk_spec_cpu *s, uint32_t slot, struct seq_state *st, int32_t x, int k,
                       int32_t *drafts, float *logits)
{
    if (slot >= s->n_slots || k < 1 || k > s->k)
        return ERR_INVAL;
    struct slot *q = &s->sl[slot];
    if (!q->have_h || st->pos < 1 || s->win_slot >= 0)
        return ERR_STATE;
    const int p = st->pos;
    if (p + k + 1 > st->tokens_max)
        return ERR_FULL;
    if (!s->sn && !(s->sn = seq_snapshot_create(st)))
        return ERR_NOMEM; // every slot's state has the same shape
    if (q->n == s->cap) { // cannot happen after a commit (a <= k pending); keep room anyway
        int rc = flush(s, q, st);
        if (rc < 0)
            return rc;
    }
    int rc = push_last(s, q, st, x);
    if (rc < 0)
        return rc;
    // the first MTP pass over every pending entry (ending at p-1 with x), then k-1 feedback steps
    rc = mtp_draft_greedy(s->fc, s->m, st, q->tok, q->hid, q->pos0, q->n, k, s->lgv, s->hbuf,
                          drafts);
    if (rc < 0)
        return rc;
    q->n = 0;
    rc = forward_spec_window(s->fc, s->m, st, s->sn, x, drafts, k, logits, s->hwin,
                             FORWARD_GDN_RECURRENT);
    if (rc < 0)
        return rc;
    s->win_slot = (int)slot;
    s->win_pos = p;
    s->win_x = x;
    s->win_k = k;
    memcpy(s->win_d, drafts, sizeof(int32_t) * (size_t)k);
    return 0;
}

int wk_spec_cpu_commit(struct wk_spec_cpu *s, uint32_t slot, struct seq_state *st, int a)
{
    if (slot >= s->n_slots || s->win_slot != (int)slot || a < 0 || a > s->win_k)
        return ERR_STATE;
    struct slot *q = &s->sl[slot];
    s->win_slot = -1;
    int rc = forward_spec_commit(s->fc, s->m, st, s->sn, s->win_x, s->win_d, s->win_k, a,
                                 FORWARD_GDN_RECURRENT);
    if (rc < 0)
        return rc;
    // committed positions p .. p+a; the token after p+i is d_{i+1} for i < a, and the one after
    // p+a (the correction or bonus) comes with the next forward or window
    const size_t H = (size_t)s->H;
    for (int i = 0; i < a; i++)
        q->tok[i] = s->win_d[i];
    memcpy(q->hid, s->hwin, sizeof(float) * (size_t)a * H);
    q->pos0 = s->win_pos;
    q->n = a;
    memcpy(q->h_last, s->hwin + (size_t)a * H, sizeof(float) * H);
    q->have_h = true;
    return 0;
}
