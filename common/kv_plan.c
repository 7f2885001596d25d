/* kv_plan: the KV-pool arithmetic of docs/KV.md. No allocation, no I/O. */
#include "common/kv_plan.h"

#include "common/err.h"

#include <stdio.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

/* "5.06 GiB" in the reference engine's style; small sizes in MiB so they do not read 0.00 GiB */
static const char *fmt_size(int64_t bytes, char *buf, size_t len)
{
    double b = (double)bytes;
    if (b >= 0.1 * GIB || b <= -0.1 * GIB)
        snprintf(buf, len, "%.2f GiB", b / GIB);
    else
        snprintf(buf, len, "%.2f MiB", b / (1024.0 * 1024.0));
    return buf;
}

const char *kv_dtype_name(enum kv_dtype d)
{
    switch (d) {
    case KV_DTYPE_BF16:
        return "bf16";
    case KV_DTYPE_FP8:
        return "fp8";
    default:
        return "auto";
    }
}

int kv_dtype_parse(const char *s)
{
    if (!s)
        return -1;
    if (strcmp(s, "auto") == 0)
        return KV_DTYPE_AUTO;
    if (strcmp(s, "bf16") == 0 || strcmp(s, "bfloat16") == 0)
        return KV_DTYPE_BF16;
    if (strcmp(s, "fp8") == 0 || strcmp(s, "fp8_e4m3") == 0)
        return KV_DTYPE_FP8;
    return -1;
}

int64_t kv_plan_blocks_for(const struct kv_plan *p, int64_t n_tokens)
{
    if (n_tokens <= 0)
        return 0;
    return (n_tokens + p->block_tokens - 1) / p->block_tokens;
}

/* One sequence of len tokens: its KV blocks and its state (whole blocks in the pool). */
static int64_t seq_bytes(const struct kv_plan *p, int64_t len)
{
    if (p->state_in_pool)
        return (kv_plan_blocks_for(p, len) + p->state_blocks) * p->block_bytes;
    return kv_plan_blocks_for(p, len) * p->block_bytes + p->state_bytes_per_seq;
}

/* State in the pool: every byte is a block; a sequence takes its state's blocks at admission. */
static void plan_pool(struct kv_plan *p, int64_t want_seqs)
{
    p->n_blocks = p->budget_bytes / p->block_bytes;
    p->n_state_slots = want_seqs;
    p->pool_tokens = (p->n_blocks - p->state_blocks) * p->block_tokens;
    double by_mem =
        (double)p->n_blocks / (double)(kv_plan_blocks_for(p, p->max_model_len) + p->state_blocks);
    p->max_concurrency = by_mem < (double)want_seqs ? by_mem : (double)want_seqs;
    if (p->request_len > 0) {
        p->requests_by_memory =
            p->n_blocks / (kv_plan_blocks_for(p, p->request_len) + p->state_blocks);
    }
}

/* State in slots: reserved up front for up to max_num_seqs sequences, but from at most half of
 * what is left after one max-length sequence's KV: the other half stays KV blocks, so a small
 * budget is not eaten by slots that only short sequences could use. */
static void plan_slots(struct kv_plan *p, int64_t want_seqs)
{
    int64_t max_len_kv = kv_plan_blocks_for(p, p->max_model_len) * p->block_bytes;
    int64_t spare = p->budget_bytes - max_len_kv - p->state_bytes_per_seq;
    int64_t slots = p->state_bytes_per_seq > 0
                        ? 1 + (spare > 0 ? spare / 2 / p->state_bytes_per_seq : 0)
                        : want_seqs;
    if (slots > want_seqs)
        slots = want_seqs;
    if (slots < 1)
        slots = 1;
    p->n_state_slots = slots;
    p->n_blocks = (p->budget_bytes - slots * p->state_bytes_per_seq) / p->block_bytes;
    p->pool_tokens = p->n_blocks * p->block_tokens;
    double by_kv = (double)p->n_blocks / (double)kv_plan_blocks_for(p, p->max_model_len);
    p->max_concurrency = by_kv < (double)slots ? by_kv : (double)slots;
    if (p->request_len > 0)
        p->requests_by_memory = p->n_blocks / kv_plan_blocks_for(p, p->request_len);
}

/* The per-token, per-block and per-sequence sizes (no budget yet). */
static int plan_sizes(const struct kv_geom *g, const struct kv_opts *o, struct kv_plan *p,
                      char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    if (g->n_attn_layers < 0 || g->n_gdn_layers < 0 || g->n_kv_heads <= 0 || g->head_dim <= 0 ||
        (g->n_gdn_layers > 0 && (g->gdn_conv_dim <= 0 || g->gdn_conv_kernel < 1 ||
                                 g->gdn_v_heads <= 0 || g->gdn_k_dim <= 0 || g->gdn_v_dim <= 0))) {
        snprintf(err, errlen, "kv plan: model geometry is invalid");
        return ERR_INVAL;
    }
    if (o->max_model_len < 0 || o->max_num_seqs < 0 || o->kv_cache_memory_bytes < 0 ||
        o->gpu_memory_utilization < 0 || o->gpu_memory_utilization > 1 || o->spec_tokens < 0 ||
        o->block_tokens < 0 || o->request_len < 0) {
        snprintf(err, errlen, "kv plan: a flag is out of range (lengths, counts and bytes must be "
                              ">= 0, --gpu-memory-utilization in (0, 1])");
        return ERR_INVAL;
    }
    p->dtype = o->dtype == KV_DTYPE_AUTO ? KV_DTYPE_BF16 : o->dtype;
    p->max_model_len = o->max_model_len ? o->max_model_len : g->max_position_embeddings;
    if (p->max_model_len <= 0) {
        snprintf(err, errlen, "kv plan: max_model_len unknown: pass --max-model-len");
        return ERR_INVAL;
    }
    p->block_tokens = o->block_tokens ? o->block_tokens : 16;
    int64_t elem = p->dtype == KV_DTYPE_FP8 ? 1 : 2;
    p->kv_bytes_per_token_layer = 2 * (int64_t)g->n_kv_heads * g->head_dim * elem;
    p->n_kv_layers = g->n_attn_layers + (o->spec_tokens > 0 ? g->mtp_layers : 0);
    p->kv_bytes_per_token = p->kv_bytes_per_token_layer * p->n_kv_layers;
    p->block_bytes = p->kv_bytes_per_token * p->block_tokens;
    /* conv window: Kc-1 pre-conv inputs per channel, model dtype (bf16); recurrent S: Hv x Dk x Dv */
    int64_t conv = g->gdn_conv_dim * (g->gdn_conv_kernel - 1) * (g->conv_state_f32 ? 4 : 2);
    int64_t ssm = (int64_t)g->gdn_v_heads * g->gdn_k_dim * g->gdn_v_dim * (g->ssm_state_f32 ? 4 : 2);
    p->gdn_bytes_per_layer = g->n_gdn_layers ? conv + ssm : 0;
    p->state_bytes_per_seq = p->gdn_bytes_per_layer * g->n_gdn_layers;
    p->state_in_pool = o->state_in_pool;
    if (p->state_in_pool && p->block_bytes > 0)
        p->state_blocks = (p->state_bytes_per_seq + p->block_bytes - 1) / p->block_bytes;
    p->request_len = o->request_len;
    return 0;
}

int64_t kv_plan_state_blocks(const struct kv_geom *g, const struct kv_opts *o)
{
    struct kv_opts t = *o;
    struct kv_plan p;
    char err[256];
    t.state_in_pool = true;
    int rc = plan_sizes(g, &t, &p, err, sizeof err);
    return rc < 0 ? rc : p.state_blocks;
}

int kv_plan_compute(const struct kv_geom *g, const struct kv_opts *o, struct kv_plan *p, char *err,
                    size_t errlen)
{
    int rc = plan_sizes(g, o, p, err, errlen);
    if (rc < 0)
        return rc;
    p->seq_bytes_max_len = seq_bytes(p, p->max_model_len);
    p->tokens_per_gib = (double)p->max_model_len / ((double)p->seq_bytes_max_len / GIB);

    if (o->kv_cache_memory_bytes > 0) {
        p->budget_bytes = o->kv_cache_memory_bytes;
    } else {
        double util = o->gpu_memory_utilization > 0 ? o->gpu_memory_utilization : 0.9;
        p->budget_bytes = (int64_t)((double)o->device_total_bytes * util) - o->weights_bytes -
                          o->reserve_bytes;
    }
    /* largest length whose blocks + one state fit (block granularity) */
    if (p->state_in_pool) {
        int64_t kv_blocks =
            p->block_bytes > 0 ? p->budget_bytes / p->block_bytes - p->state_blocks : 0;
        p->max_len_fit = kv_blocks > 0 ? kv_blocks * p->block_tokens : 0;
    } else {
        int64_t kv_room = p->budget_bytes - p->state_bytes_per_seq;
        p->max_len_fit =
            kv_room > 0 && p->block_bytes > 0 ? (kv_room / p->block_bytes) * p->block_tokens : 0;
    }
    if (p->max_len_fit > p->max_model_len)
        p->max_len_fit = p->max_model_len;

    if (p->budget_bytes <= 0) {
        char b0[32];
        snprintf(err, errlen,
                 "no memory is left for the KV cache (%s after weights and reserve); increase "
                 "--gpu-memory-utilization or pass --kv-cache-memory-bytes",
                 fmt_size(p->budget_bytes, b0, sizeof b0));
        return ERR_FULL;
    }
    if (p->seq_bytes_max_len > p->budget_bytes) {
        char b0[32], b1[32];
        int n = snprintf(err, errlen,
                         "one sequence of max_model_len=%lld needs %s of KV cache and GDN state "
                         "(%s KV), but only %s is available for the cache.",
                         (long long)p->max_model_len, fmt_size(p->seq_bytes_max_len, b0, sizeof b0),
                         kv_dtype_name(p->dtype), fmt_size(p->budget_bytes, b1, sizeof b1));
        if (n > 0 && (size_t)n < errlen) {
            if (p->max_len_fit > 0)
                snprintf(err + n, errlen - (size_t)n,
                         " The largest max_model_len that fits is %lld: decrease --max-model-len, "
                         "or increase --kv-cache-memory-bytes / --gpu-memory-utilization%s.",
                         (long long)p->max_len_fit,
                         p->dtype == KV_DTYPE_BF16 ? ", or use --kv-cache-dtype fp8" : "");
            else
                snprintf(err + n, errlen - (size_t)n,
                         " Not even one GDN state fits: increase --kv-cache-memory-bytes / "
                         "--gpu-memory-utilization.");
        }
        return ERR_FULL;
    }
    int64_t want_seqs = o->max_num_seqs ? o->max_num_seqs : 256;
    if (p->block_bytes <= 0) {
        snprintf(err, errlen, "kv plan: the model has no attention KV to page");
        return ERR_INVAL;
    }
    if (p->state_in_pool)
        plan_pool(p, want_seqs);
    else
        plan_slots(p, want_seqs);
    p->concurrent_requests =
        p->requests_by_memory < p->n_state_slots ? p->requests_by_memory : p->n_state_slots;
    return 0;
}
