/* kv_geom: count attention and GDN layers and their state sizes from the config. */
#include "model/kv_geom.h"

#include <string.h>

void model_kv_geom(const struct model_config *c, bool has_mtp_tensors, struct kv_geom *g)
{
    memset(g, 0, sizeof(*g));
    for (int i = 0; i < c->n_layers; i++) {
        if (c->layer_types[i] == LAYER_FULL_ATTN)
            g->n_attn_layers++;
        else
            g->n_gdn_layers++;
    }
    g->n_kv_heads = c->n_kv_heads;
    g->head_dim = c->head_dim;
    g->gdn_conv_dim = 2LL * c->lin_n_k_heads * c->lin_k_head_dim +
                      (int64_t)c->lin_n_v_heads * c->lin_v_head_dim;
    g->gdn_conv_kernel = c->lin_conv_kernel;
    g->gdn_v_heads = c->lin_n_v_heads;
    g->gdn_k_dim = c->lin_k_head_dim;
    g->gdn_v_dim = c->lin_v_head_dim;
    g->ssm_state_f32 = c->ssm_state_f32;
    g->mtp_layers = has_mtp_tensors ? c->mtp_n_layers : 0;
    g->max_position_embeddings = c->max_position_embeddings;
}
