/* forward_spec: speculative verification (see model/forward_spec.h). Rollback is snapshot +
 * replay: simple and exact, at the cost of re-running the accepted prefix when a draft is
 * rejected. */
#include "model/forward_spec.h"

#include "common/err.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/sample.h"
#include "model/state.h"

#include <string.h>

static void window_tokens(int32_t *win, int32_t x, const int32_t *drafts, int k)
{
    win[0] = x;
    if (k > 0)
        memcpy(win + 1, drafts, sizeof(int32_t) * (size_t)k);
}

int forward_spec_window(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                        struct seq_snapshot *sn, int32_t x, const int32_t *drafts, int k,
                        float *logits, float *hidden_out, int flags)
{
    int32_t win[FORWARD_SPEC_MAX + 1];
    if (k < 0 || k > FORWARD_SPEC_MAX || !logits)
        return ERR_INVAL;
    window_tokens(win, x, drafts, k);
    seq_state_save(st, sn);
    return forward_run(fc, m, st, win, k + 1, logits, hidden_out, flags | FORWARD_LOGITS_ALL);
}

int forward_spec_commit(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                        const struct seq_snapshot *sn, int32_t x, const int32_t *drafts, int k,
                        int a, int flags)
{
    int32_t win[FORWARD_SPEC_MAX + 1];
    if (k < 0 || k > FORWARD_SPEC_MAX || a < 0 || a > k)
        return ERR_INVAL;
    if (a == k)
        return 0;
    window_tokens(win, x, drafts, k);
    int rc = seq_state_restore(st, sn);
    if (rc == 0)
        rc = forward_run(fc, m, st, win, a + 1, NULL, NULL, flags);
    return rc;
}

int forward_spec_verify(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                        struct seq_snapshot *sn, int32_t x, const int32_t *drafts, int k,
                        float *logits, float *hidden_out, int32_t *out, int flags)
{
    const int V = m->cfg.vocab_size;
    int rc = forward_spec_window(fc, m, st, sn, x, drafts, k, logits, hidden_out, flags);
    if (rc < 0)
        return rc;
    int a = 0;
    for (;;) {
        const int32_t t = sample_argmax(logits + (int64_t)a * V, V);
        out[a] = t;
        if (a == k || t != drafts[a])
            break;
        a++;
    }
    rc = forward_spec_commit(fc, m, st, sn, x, drafts, k, a, flags);
    return rc < 0 ? rc : a + 1;
}
