/* state: per-sequence K/V, GDN conv windows and recurrent states (see model/state.h). The large
 * buffers use plain malloc (load-dependent sizes): create returns NULL instead of aborting. */
#include "model/state.h"

#include "common/err.h"
#include "common/xalloc.h"
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

struct seq_snapshot {
    int n_layers;
    int64_t conv_floats;       // per GDN layer
    int64_t ssm_floats;        // per GDN layer
    int pos;
    float *data;               // per GDN layer in order: conv then ssm
};

static float *alloc_floats(int64_t n)
{
    return calloc((size_t)n, sizeof(float));
}

struct seq_state *seq_state_create(const struct model *m, int tokens_max)
{
    const struct model_config *c = &m->cfg;
    if (tokens_max <= 0 || c->n_layers <= 0 || c->n_layers > MODEL_MAX_LAYERS)
        return NULL;
    struct seq_state *st = xcalloc(1, sizeof(*st));
    st->n_layers = c->n_layers;
    st->tokens_max = tokens_max;
    st->kv_width = c->n_kv_heads * c->head_dim;
    st->conv_rows = c->lin_conv_kernel - 1;
    st->conv_dim = 2 * c->lin_n_k_heads * c->lin_k_head_dim + c->lin_n_v_heads * c->lin_v_head_dim;
    st->ssm_floats = (int64_t)c->lin_n_v_heads * c->lin_k_head_dim * c->lin_v_head_dim;
    st->k = xcalloc((size_t)c->n_layers, sizeof(float *));
    st->v = xcalloc((size_t)c->n_layers, sizeof(float *));
    st->conv = xcalloc((size_t)c->n_layers, sizeof(float *));
    st->ssm = xcalloc((size_t)c->n_layers, sizeof(float *));
    int64_t kv = (int64_t)tokens_max * st->kv_width;
    for (int l = 0; l < c->n_layers; l++) {
        if (c->layer_types[l] == LAYER_FULL_ATTN) {
            st->k[l] = alloc_floats(kv);
            st->v[l] = alloc_floats(kv);
            if (!st->k[l] || !st->v[l])
                goto fail;
        } else {
            st->conv[l] = alloc_floats((int64_t)st->conv_rows * st->conv_dim + 1);
            st->ssm[l] = alloc_floats(st->ssm_floats);
            if (!st->conv[l] || !st->ssm[l])
                goto fail;
        }
    }
    if (m->has_mtp) {
        st->mtp_k = alloc_floats(kv);
        st->mtp_v = alloc_floats(kv);
        if (!st->mtp_k || !st->mtp_v)
            goto fail;
    }
    return st;
fail:
    seq_state_destroy(st);
    return NULL;
}

void seq_state_destroy(struct seq_state *st)
{
    if (!st)
        return;
    for (int l = 0; l < st->n_layers; l++) {
        free(st->k[l]);
        free(st->v[l]);
        free(st->conv[l]);
        free(st->ssm[l]);
    }
    free(st->k);
    free(st->v);
    free(st->conv);
    free(st->ssm);
    free(st->mtp_k);
    free(st->mtp_v);
    free(st);
}

void seq_state_reset(struct seq_state *st)
{
    st->pos = 0;
    for (int l = 0; l < st->n_layers; l++) {
        if (st->conv[l])
            memset(st->conv[l], 0, sizeof(float) * (size_t)st->conv_rows * (size_t)st->conv_dim);
        if (st->ssm[l])
            memset(st->ssm[l], 0, sizeof(float) * (size_t)st->ssm_floats);
    }
}

int64_t seq_state_bytes(const struct seq_state *st)
{
    int64_t n = 0;
    int64_t kv = (int64_t)st->tokens_max * st->kv_width;
    for (int l = 0; l < st->n_layers; l++) {
        if (st->k[l])
            n += 2 * kv;
        if (st->ssm[l])
            n += (int64_t)st->conv_rows * st->conv_dim + st->ssm_floats;
    }
    if (st->mtp_k)
        n += 2 * kv;
    return n * (int64_t)sizeof(float);
}

// ---- snapshot / restore ----

struct seq_snapshot *seq_snapshot_create(const struct seq_state *st)
{
    struct seq_snapshot *sn = xcalloc(1, sizeof(*sn));
    sn->n_layers = st->n_layers;
    sn->conv_floats = (int64_t)st->conv_rows * st->conv_dim;
    sn->ssm_floats = st->ssm_floats;
    int n_gdn = 0;
    for (int l = 0; l < st->n_layers; l++)
        n_gdn += st->ssm[l] != NULL;
    sn->data = alloc_floats((int64_t)n_gdn * (sn->conv_floats + sn->ssm_floats) + 1);
    if (!sn->data) {
        free(sn);
        return NULL;
    }
    return sn;
}

void seq_snapshot_destroy(struct seq_snapshot *sn)
{
    if (!sn)
        return;
    free(sn->data);
    free(sn);
}

void seq_state_save(const struct seq_state *st, struct seq_snapshot *sn)
{
    float *p = sn->data;
    sn->pos = st->pos;
    for (int l = 0; l < st->n_layers; l++) {
        if (!st->ssm[l])
            continue;
        memcpy(p, st->conv[l], sizeof(float) * (size_t)sn->conv_floats);
        p += sn->conv_floats;
        memcpy(p, st->ssm[l], sizeof(float) * (size_t)sn->ssm_floats);
        p += sn->ssm_floats;
    }
}

int seq_state_restore(struct seq_state *st, const struct seq_snapshot *sn)
{
    if (sn->n_layers != st->n_layers || sn->ssm_floats != st->ssm_floats ||
        sn->conv_floats != (int64_t)st->conv_rows * st->conv_dim)
        return ERR_INVAL;
    const float *p = sn->data;
    st->pos = sn->pos;
    for (int l = 0; l < st->n_layers; l++) {
        if (!st->ssm[l])
            continue;
        memcpy(st->conv[l], p, sizeof(float) * (size_t)sn->conv_floats);
        p += sn->conv_floats;
        memcpy(st->ssm[l], p, sizeof(float) * (size_t)sn->ssm_floats);
        p += sn->ssm_floats;
    }
    return 0;
}
