/* compare_print: the side-by-side text form of a compare_build() object. Reads only the cJSON
 * object, so text and --json always say the same thing. */
#include "model/compare.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define COL_KEY 28
#define COL_VAL 36

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static bool config_only(const cJSON *ck)
{
    return strcmp(str(ck, "source"), "config_only") == 0;
}

static const char *human(double b, char *buf, size_t len)
{
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(buf, len, "%.2f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0)
        snprintf(buf, len, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, len, "%.0f B", b);
    return buf;
}

/* Short form of inspect's scheme strings for the table. */
static const char *short_scheme(const char *s, char *buf, size_t len)
{
    static const char *const map[][2] = {
        {"NVFP4 weight-only (no activation quant)", "NVFP4 W4A16"},
        {"NVFP4 W4A4 (activations quantized per 16)", "NVFP4 W4A4"},
    };
    size_t o = 0;
    buf[0] = '\0';
    while (*s && o + 1 < len) {
        size_t i;
        for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
            size_t l = strlen(map[i][0]);
            if (strncmp(s, map[i][0], l) == 0) {
                o += (size_t)snprintf(buf + o, len - o, "%s", map[i][1]);
                s += l;
                break;
            }
        }
        if (i == sizeof(map) / sizeof(map[0]))
            buf[o++] = *s++, buf[o] = '\0';
    }
    return buf;
}

/* One table line is built in a buffer so trailing padding can be dropped. */
struct line {
    char buf[2048];
    size_t n;
};

static void row_start(struct line *l, const char *key)
{
    l->n = 0;
    int w = snprintf(l->buf, sizeof(l->buf), "%-*s", COL_KEY, key);
    l->n = w > 0 ? (size_t)w : 0;
}

static void cell(struct line *l, const char *v)
{
    if (l->n >= sizeof(l->buf))
        return;
    int w = snprintf(l->buf + l->n, sizeof(l->buf) - l->n, " %-*s", COL_VAL - 1, v);
    l->n += w > 0 ? (size_t)w : 0;
    if (l->n >= sizeof(l->buf))
        l->n = sizeof(l->buf) - 1;
}

static void row_end(FILE *f, struct line *l)
{
    while (l->n > 0 && l->buf[l->n - 1] == ' ')
        l->n--;
    l->buf[l->n] = '\0';
    fprintf(f, "%s\n", l->buf);
}

// ---- checkpoint rows ----

typedef void (*cell_fn)(const cJSON *ck, char *buf, size_t len, const void *arg);

static void row(FILE *f, const cJSON *arr, const char *key, cell_fn fn, const void *arg)
{
    const cJSON *e;
    char buf[512];
    struct line l;
    row_start(&l, key);
    cJSON_ArrayForEach(e, arr)
    {
        fn(e, buf, sizeof(buf), arg);
        cell(&l, buf);
    }
    row_end(f, &l);
}

static void c_str(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    snprintf(buf, len, "%s", str(ck, (const char *)arg));
}

static void c_scheme(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    short_scheme(str(get(ck, "schemes"), (const char *)arg), buf, len);
}

static void c_served(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    snprintf(buf, len, "%s", cJSON_IsTrue(get(ck, "served")) ? "yes" : "NO");
}

static void c_act(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    snprintf(buf, len, "%s", cJSON_IsTrue(get(get(ck, "schemes"), "activations_quantized"))
                                 ? "yes (W4A4)" : "no");
}

static void c_tensors(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    const cJSON *t = get(ck, "tensors");
    if (config_only(ck))
        snprintf(buf, len, "not counted");
    else
        snprintf(buf, len, "%.0f (%.0f skipped)", num(t, "total"), num(t, "skipped"));
}

static void c_mtp(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    const cJSON *m = get(ck, "mtp");
    char h[32];
    if (config_only(ck))
        snprintf(buf, len, "%.0f layer / assumed present (%s)", num(m, "declared_layers"),
                 human(num(m, "bytes"), h, sizeof(h)));
    else
        snprintf(buf, len, "%.0f layer / %.0f tensors (%s)", num(m, "declared_layers"),
                 num(m, "tensors"), human(num(m, "bytes"), h, sizeof(h)));
}

static void c_source(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    snprintf(buf, len, "%s", config_only(ck) ? "config.json (estimated)" : "tensor headers");
}

static void c_vision(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    const cJSON *v = get(ck, "vision");
    char h[32];
    if (config_only(ck))
        snprintf(buf, len, "not counted");
    else if (cJSON_IsTrue(get(v, "present")))
        snprintf(buf, len, "%.0f tensors (%s, skipped)", num(v, "tensors"),
                 human(num(v, "bytes"), h, sizeof(h)));
    else
        snprintf(buf, len, "absent");
}

static void c_group(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    const char *g = arg;
    human(num(get(get(ck, "resident"), "groups"), g), buf, len);
    size_t o = strlen(buf);
    if (!config_only(ck))
        snprintf(buf + o, len - o, " (%.0f)", num(get(get(ck, "tensors"), "groups"), g));
}

static void c_bytes(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    const char *const *path = arg; /* {object, key} */
    human(num(get(ck, path[0]), path[1]), buf, len);
}

static void c_kv(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    const char *d = arg;
    const cJSON *k = get(get(ck, "kv"), d);
    snprintf(buf, len, "%.0f B (%.0f with MTP)", num(k, "bytes_per_token"),
             num(k, "bytes_per_token_with_mtp"));
}

static void c_state(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    human(num(get(get(ck, "kv"), "bf16"), "state_bytes_per_seq"), buf, len);
}

static void c_tpg(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    const cJSON *kv = get(ck, "kv");
    snprintf(buf, len, "%.0f / %.0f (at %.0f)", num(get(kv, "bf16"), "tokens_per_gib"),
             num(get(kv, "fp8"), "tokens_per_gib"), num(get(kv, "bf16"), "at_context"));
}

static void c_split(const cJSON *ck, char *buf, size_t len, const void *arg)
{
    (void)arg;
    const cJSON *d = get(ck, "decode");
    double all = num(d, "active_weight_bytes");
    if (all <= 0) {
        snprintf(buf, len, "-");
        return;
    }
    snprintf(buf, len, "%.0f%% / %.0f%% / %.0f%%", 100.0 * num(d, "routed_expert_bytes") / all,
             100.0 * num(d, "linear_attn_bytes") / all, 100.0 * num(d, "lm_head_bytes") / all);
}

static void print_checkpoints(FILE *f, const cJSON *arr)
{
    static const char *const groups[] = {"embedding", "lm_head", "linear_attn", "full_attn",
                                         "experts", "shared_experts", "router", "norms"};
    static const char *const rt[2] = {"resident", "total_bytes"};
    static const char *const rtm[2] = {"resident", "total_with_mtp_bytes"};
    static const char *const act[2] = {"decode", "active_weight_bytes"};
    const cJSON *e;
    struct line l;
    row_start(&l, "");
    cJSON_ArrayForEach(e, arr)
        cell(&l, str(e, "label"));
    row_end(f, &l);
    row(f, arr, "path", c_str, "path");
    row(f, arr, "source", c_source, NULL);
    row(f, arr, "architecture", c_str, "architecture");
    row(f, arr, "served by tern", c_served, NULL);
    row(f, arr, "quantization", c_scheme, "method");
    row(f, arr, "  experts", c_scheme, "experts");
    row(f, arr, "  shared experts", c_scheme, "shared_experts");
    row(f, arr, "  attention", c_scheme, "attention");
    row(f, arr, "  linear attention", c_scheme, "linear_attention");
    row(f, arr, "  router", c_scheme, "router");
    row(f, arr, "  lm_head", c_scheme, "lm_head");
    row(f, arr, "  embeddings", c_scheme, "embeddings");
    row(f, arr, "  mtp head", c_scheme, "mtp");
    row(f, arr, "activations quantized", c_act, NULL);
    row(f, arr, "tensors", c_tensors, NULL);
    row(f, arr, "MTP declared / present", c_mtp, NULL);
    row(f, arr, "vision tower", c_vision, NULL);
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
        char k[64];
        snprintf(k, sizeof(k), "resident %s", groups[i]);
        row(f, arr, k, c_group, groups[i]);
    }
    row(f, arr, "resident total", c_bytes, rt);
    row(f, arr, "resident total + MTP", c_bytes, rtm);
    row(f, arr, "KV/token bf16", c_kv, "bf16");
    row(f, arr, "KV/token fp8", c_kv, "fp8");
    row(f, arr, "GDN state/sequence", c_state, NULL);
    row(f, arr, "tokens/GiB bf16 / fp8", c_tpg, NULL);
    row(f, arr, "active weights/token", c_bytes, act);
    row(f, arr, "  experts / GDN / lm_head", c_split, NULL);
    cJSON_ArrayForEach(e, arr)
    {
        if (config_only(e))
            fprintf(f, "note: %s: %s\n", str(e, "label"), COMPARE_CONFIG_ONLY_NOTE);
        const char *note = str(get(e, "mtp"), "note");
        if (note[0])
            fprintf(f, "note: %s: %s\n", str(e, "label"), note);
        if (!cJSON_IsTrue(get(e, "served")))
            fprintf(f, "note: %s: %s\n", str(e, "label"), str(e, "served_reason"));
    }
}

// ---- GPU rows ----

static void g_backend(const cJSON *ev, char *buf, size_t len, const void *arg)
{
    const cJSON *b = get(get(ev, "backends"), (const char *)arg);
    if (!b)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%s (%s)", str(b, "backend"), str(b, "scheme"));
}

static void g_ctx(const cJSON *ev, char *buf, size_t len, const void *arg)
{
    double v = num(ev, (const char *)arg), maxpos = num(ev, "max_position_embeddings");
    if (v <= 0 && strcmp((const char *)arg, "max_context_bf16_mtp") == 0 &&
        cJSON_GetArraySize(get(ev, "mtp")) == 0)
        snprintf(buf, len, "-");
    else if (v <= 0)
        snprintf(buf, len, "does not fit");
    else
        snprintf(buf, len, "%.0f tokens%s", v, maxpos > 0 && v > maxpos ? " (> model max)" : "");
}

static void g_decode(const cJSON *ev, char *buf, size_t len, const void *arg)
{
    (void)arg;
    human(num(ev, "decode_bytes_per_token"), buf, len);
}

static void g_tps(const cJSON *ev, char *buf, size_t len, const void *arg)
{
    (void)arg;
    snprintf(buf, len, "%.1f tok/s", num(ev, "roofline_tokens_per_s"));
}

static void g_mtp(const cJSON *ev, char *buf, size_t len, const void *arg)
{
    int idx = *(const int *)arg;
    const cJSON *m = cJSON_GetArrayItem(get(ev, "mtp"), idx);
    if (!m)
        snprintf(buf, len, "n/a (no MTP tensors)");
    else if (num(m, "speedup") <= 1.0)
        snprintf(buf, len, "no gain (x%.3f at K=%.0f)", num(m, "speedup"), num(m, "best_k"));
    else
        snprintf(buf, len, "x%.3f K=%.0f (%.1f tok/s)", num(m, "speedup"), num(m, "best_k"),
                 num(m, "tokens_per_s"));
}

static void print_gpu(FILE *f, const cJSON *g)
{
    char h[32];
    int sm = (int)num(g, "sm");
    char bw[96];
    if (num(g, "mem_gbps_measured") > 0)
        snprintf(bw, sizeof(bw), "%.0f GB/s spec sheet, %.0f GB/s measured copy",
                 num(g, "mem_gbps_spec"), num(g, "mem_gbps_measured"));
    else
        snprintf(bw, sizeof(bw), "%.0f GB/s spec sheet", num(g, "mem_gbps_spec"));
    fprintf(f, "\n== %s: %s, %s, %s, sm_%d, %s%s\n", str(g, "name"), str(g, "display"),
            human(num(g, "mem_bytes"), h, sizeof(h)), bw, sm,
            cJSON_IsTrue(get(g, "fp4_mma_sync")) ? "fp4 mma.sync"
            : cJSON_IsTrue(get(g, "fp4_tcgen05")) ? "fp4 tcgen05 (no tern kernel)"
            : cJSON_IsTrue(get(g, "fp8_mma")) ? "fp8 mma, no fp4 mma" : "no fp8/fp4 mma",
            cJSON_IsTrue(get(g, "unified_memory")) ? ", memory shared with the CPU" : "");
    const cJSON *evs = get(g, "checkpoints");
    static const char *const classes[] = {"moe", "shared_expert", "linear_attn", "attention",
                                          "lm_head", "mtp"};
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        char k[64];
        snprintf(k, sizeof(k), "kernel %s", classes[i]);
        row(f, evs, k, g_backend, classes[i]);
    }
    row(f, evs, "max context bf16 KV", g_ctx, "max_context_bf16");
    row(f, evs, "max context fp8 KV", g_ctx, "max_context_fp8");
    row(f, evs, "max context bf16 + MTP", g_ctx, "max_context_bf16_mtp");
    const cJSON *e0 = cJSON_GetArrayItem(evs, 0);
    char k[64];
    snprintf(k, sizeof(k), "bytes/token @%.0f ctx", num(e0, "context_tokens"));
    row(f, evs, k, g_decode, NULL);
    snprintf(k, sizeof(k), "roofline batch 1 @%.0f GB/s", num(g, "roofline_gbps"));
    row(f, evs, k, g_tps, NULL);
    static const int i0 = 0, i1 = 1;
    row(f, evs, "MTP @ acceptance 0.6", g_mtp, &i0);
    row(f, evs, "MTP @ acceptance 0.8", g_mtp, &i1);
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs)
    {
        const cJSON *b;
        if (!cJSON_IsTrue(get(ev, "runs")))
            fprintf(f, "  %s: %s\n", str(ev, "label"), str(ev, "backend_error"));
        cJSON_ArrayForEach(b, get(ev, "backends"))
        {
            if (strcmp(str(b, "backend"), "bf16") == 0 && strcmp(b->string, "moe") != 0)
                continue;
            /* print each (backend, reason) once, naming the other classes that share it */
            bool seen = false;
            for (const cJSON *p = get(ev, "backends")->child; p != b && !seen; p = p->next)
                seen = strcmp(str(p, "backend"), str(b, "backend")) == 0 &&
                       strcmp(str(p, "reason"), str(b, "reason")) == 0;
            if (seen)
                continue;
            fprintf(f, "  %s %s_backend=%s reason=\"%s\"", str(ev, "label"), b->string,
                    str(b, "backend"), str(b, "reason"));
            const char *sep = " (same for ";
            for (const cJSON *q = b->next; q; q = q->next) {
                if (strcmp(str(q, "backend"), str(b, "backend")) == 0 &&
                    strcmp(str(q, "reason"), str(b, "reason")) == 0) {
                    fprintf(f, "%s%s", sep, q->string);
                    sep = ", ";
                }
            }
            fprintf(f, "%s\n", sep[0] == ',' ? ")" : "");
        }
    }
    fprintf(f, "recommendation: %s\n", str(get(g, "recommendation"), "line"));
}

void compare_print_text(FILE *f, const cJSON *cmp)
{
    const cJSON *ck = get(cmp, "checkpoints");
    const cJSON *as = get(cmp, "assumptions");
    print_checkpoints(f, ck);
    const cJSON *g;
    cJSON_ArrayForEach(g, get(cmp, "gpus"))
        print_gpu(f, g);
    fprintf(f, "\nassumptions: batch 1, bf16 KV, %.0f-token context, weights + KV + 2x GDN state "
            "read per token; memory budget %.2f x device - weights - %.1f GiB reserve; MTP: K "
            "draft steps each read the MTP layer (experts of K+1 tokens in the first) + lm_head, "
            "verify reads the union of experts of K+1 tokens, E*(1-(1-k/E)^(K+1)); "
            "best K in 1..%d\n",
            num(as, "context_tokens"), num(as, "gpu_memory_utilization"),
            num(as, "reserve_bytes") / (1024.0 * 1024 * 1024), COMPARE_MAX_DRAFTS);
}
