/* sched_check: the KV-pool plan for the scheduler's flags (see sched_check.h, docs/KV.md). */
#include "sched_check.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "model/config.h"
#include "model/config_load.h"
#include "model/kv_geom.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* Sum of the *.safetensors file sizes in dir: the resident weights when not given. */
static int64_t safetensors_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0)
            continue;
        char path[1024];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            total += (int64_t)st.st_size;
    }
    closedir(d);
    return total;
}

static int load_config(const struct sched_cfg *cfg, struct model_config *mc, char *err,
                       size_t errlen)
{
    char why[400];
    if (cfg->model[0]) {
        int rc = config_load(mc, cfg->model, why, sizeof why);
        if (rc < 0)
            snprintf(err, errlen, "model %s: %s", cfg->model,
                     rc == ERR_FORMAT || rc == ERR_RANGE ? why : err_str(rc));
        return rc;
    }
    size_t len = 0;
    char *text = file_read(cfg->model_config, &len);
    if (!text) {
        snprintf(err, errlen, "model config %s: cannot be read", cfg->model_config);
        return ERR_IO;
    }
    int rc = config_parse(mc, text, why, sizeof why);
    if (rc == 0)
        rc = config_validate(mc, why, sizeof why);
    free(text);
    if (rc < 0)
        snprintf(err, errlen, "model config %s: %s", cfg->model_config, why);
    return rc;
}

int sched_check_plan(const struct sched_cfg *cfg, struct kv_geom *geom, struct kv_plan *plan,
                     char *err, size_t errlen)
{
    struct kv_geom g_local;
    struct kv_geom *g = geom ? geom : &g_local;
    memset(plan, 0, sizeof *plan);
    memset(g, 0, sizeof *g);
    if (!cfg->model[0] && !cfg->model_config[0]) {
        snprintf(err, errlen, "no model: pass --model DIR or --config FILE (config.json)");
        return ERR_INVAL;
    }
    struct model_config *mc = xcalloc(1, sizeof *mc);
    int rc = load_config(cfg, mc, err, errlen);
    if (rc < 0)
        goto out;
    /* from the config alone the MTP head is assumed present when declared (mtp_num_hidden_layers)
     */
    model_kv_geom(mc, mc->mtp_n_layers > 0, g);
    struct kv_opts o;
    memset(&o, 0, sizeof o);
    o.dtype = (enum kv_dtype)kv_dtype_parse(cfg->kv_cache_dtype);
    o.max_model_len = cfg->max_model_len;
    o.max_num_seqs = cfg->max_num_seqs;
    o.kv_cache_memory_bytes = cfg->kv_cache_memory_bytes;
    o.gpu_memory_utilization = cfg->gpu_memory_utilization;
    o.device_total_bytes = cfg->device_memory_bytes;
    o.weights_bytes = cfg->weights_bytes;
    if (!o.weights_bytes && cfg->model[0])
        o.weights_bytes = safetensors_bytes(cfg->model);
    o.reserve_bytes = cfg->reserve_bytes;
    o.spec_tokens = cfg->speculative_tokens;
    o.state_in_pool = strcmp(cfg->gdn_state, "slots") != 0;
    o.request_len = cfg->check_request_len;
    if (o.kv_cache_memory_bytes <= 0 && o.device_total_bytes <= 0) {
        snprintf(err, errlen,
                 "no cache budget: pass --kv-cache-memory-bytes, or "
                 "--device-memory-bytes with --gpu-memory-utilization");
        rc = ERR_INVAL;
        goto out;
    }
    rc = kv_plan_compute(g, &o, plan, err, errlen);
out:
    free(mc);
    return rc;
}

static void print_json(FILE *out, const struct sched_cfg *cfg, const struct kv_geom *g,
                       const struct kv_plan *p, int rc, const char *err)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "ok", rc == 0);
    if (rc < 0)
        cJSON_AddStringToObject(j, "error", err);
    cJSON_AddStringToObject(j, "model", cfg->model[0] ? cfg->model : cfg->model_config);
    if (p->block_tokens) { /* the config loaded: the plan's figures are meaningful */
        cJSON_AddStringToObject(j, "kv_cache_dtype", kv_dtype_name(p->dtype));
        cJSON_AddNumberToObject(j, "max_model_len", (double)p->max_model_len);
        cJSON_AddNumberToObject(j, "block_tokens", p->block_tokens);
        cJSON_AddNumberToObject(j, "speculative_tokens", cfg->speculative_tokens);
        cJSON_AddNumberToObject(j, "attention_layers", g->n_attn_layers);
        cJSON_AddNumberToObject(j, "kv_layers", p->n_kv_layers);
        cJSON_AddNumberToObject(j, "gdn_layers", g->n_gdn_layers);
        cJSON_AddNumberToObject(j, "kv_bytes_per_token_layer", (double)p->kv_bytes_per_token_layer);
        cJSON_AddNumberToObject(j, "kv_bytes_per_token", (double)p->kv_bytes_per_token);
        cJSON_AddNumberToObject(j, "block_bytes", (double)p->block_bytes);
        cJSON_AddNumberToObject(j, "gdn_bytes_per_layer", (double)p->gdn_bytes_per_layer);
        cJSON_AddNumberToObject(j, "state_bytes_per_seq", (double)p->state_bytes_per_seq);
        cJSON_AddNumberToObject(j, "seq_bytes_max_len", (double)p->seq_bytes_max_len);
        cJSON_AddNumberToObject(j, "needed_gib", (double)p->seq_bytes_max_len / GIB);
        cJSON_AddNumberToObject(j, "tokens_per_gib", p->tokens_per_gib);
        cJSON_AddNumberToObject(j, "budget_bytes", (double)p->budget_bytes);
        cJSON_AddNumberToObject(j, "available_gib", (double)p->budget_bytes / GIB);
        cJSON_AddNumberToObject(j, "max_len_fit", (double)p->max_len_fit);
        cJSON_AddStringToObject(j, "gdn_state", p->state_in_pool ? "pool" : "slots");
        if (p->state_in_pool)
            cJSON_AddNumberToObject(j, "state_blocks", (double)p->state_blocks);
    }
    if (rc == 0) {
        cJSON_AddNumberToObject(j, p->state_in_pool ? "max_num_seqs" : "state_slots",
                                (double)p->n_state_slots);
        cJSON_AddNumberToObject(j, "kv_blocks", (double)p->n_blocks);
        cJSON_AddNumberToObject(j, "pool_tokens", (double)p->pool_tokens);
        cJSON_AddNumberToObject(j, "max_concurrency", p->max_concurrency);
        if (p->request_len > 0) {
            cJSON_AddNumberToObject(j, "request_len", (double)p->request_len);
            cJSON_AddNumberToObject(j, "requests_by_memory", (double)p->requests_by_memory);
            cJSON_AddNumberToObject(j, "concurrent_requests", (double)p->concurrent_requests);
        }
    }
    char *s = cJSON_PrintUnformatted(j);
    if (s)
        fprintf(out, "%s\n", s);
    free(s);
    cJSON_Delete(j);
}

void sched_check_print(FILE *out, const struct sched_cfg *cfg, const struct kv_geom *geom,
                       const struct kv_plan *p, int rc, const char *err, bool json)
{
    if (json) {
        print_json(out, cfg, geom, p, rc, err);
        return;
    }
    if (rc < 0) {
        fprintf(out, "%s\n", err);
        return;
    }
    fprintf(out, "model: %s\n", cfg->model[0] ? cfg->model : cfg->model_config);
    fprintf(out,
            "kv cache dtype: %s, block: %d tokens, max_model_len: %lld, speculative tokens: %d\n",
            kv_dtype_name(p->dtype), p->block_tokens, (long long)p->max_model_len,
            cfg->speculative_tokens);
    fprintf(out, "attention KV: %lld B per token (%lld B x %d layers), %lld B per block\n",
            (long long)p->kv_bytes_per_token, (long long)p->kv_bytes_per_token_layer,
            p->n_kv_layers, (long long)p->block_bytes);
    fprintf(out, "GDN state: %lld B per sequence (%.2f MiB; %lld B x %d layers)\n",
            (long long)p->state_bytes_per_seq, (double)p->state_bytes_per_seq / MIB,
            (long long)p->gdn_bytes_per_layer, geom->n_gdn_layers);
    fprintf(out, "one sequence of max_model_len: %lld B = %.2f GiB needed (%.0f tokens per GiB)\n",
            (long long)p->seq_bytes_max_len, (double)p->seq_bytes_max_len / GIB, p->tokens_per_gib);
    fprintf(out, "available for the cache: %lld B = %.2f GiB\n", (long long)p->budget_bytes,
            (double)p->budget_bytes / GIB);
    if (p->state_in_pool) {
        fprintf(out,
                "GDN state in the pool: %lld blocks per sequence, taken at admission; blocks: "
                "%lld = %lld tokens of KV beside one sequence's state\n",
                (long long)p->state_blocks, (long long)p->n_blocks, (long long)p->pool_tokens);
    } else {
        fprintf(out, "GDN state in slots: %lld (%.2f GiB), KV blocks: %lld = %lld tokens\n",
                (long long)p->n_state_slots,
                (double)(p->n_state_slots * p->state_bytes_per_seq) / GIB, (long long)p->n_blocks,
                (long long)p->pool_tokens);
    }
    if (p->request_len > 0)
        fprintf(out, "requests of %lld tokens at once: %lld (memory: %lld, --max-num-seqs: %lld)\n",
                (long long)p->request_len, (long long)p->concurrent_requests,
                (long long)p->requests_by_memory, (long long)p->n_state_slots);
    fprintf(out,
            "kv_pool tokens=%lld blocks=%lld gdn_state=%s %s=%lld max_concurrency=%.2fx at "
            "max_model_len=%lld\n",
            (long long)p->pool_tokens, (long long)p->n_blocks, p->state_in_pool ? "pool" : "slots",
            p->state_in_pool ? "state_blocks" : "state_slots",
            (long long)(p->state_in_pool ? p->state_blocks : p->n_state_slots), p->max_concurrency,
            (long long)p->max_model_len);
}

void sched_check_log(const struct kv_plan *p)
{
    LOG_INFO("kv_pool",
             "tokens=%lld blocks=%lld gdn_state=%s state_blocks=%lld state_slots=%lld kv_dtype=%s "
             "needed_gib=%.2f available_gib=%.2f max_concurrency=%.2fx at max_model_len=%lld",
             (long long)p->pool_tokens, (long long)p->n_blocks, p->state_in_pool ? "pool" : "slots",
             (long long)p->state_blocks, (long long)p->n_state_slots, kv_dtype_name(p->dtype),
             (double)p->seq_bytes_max_len / GIB, (double)p->budget_bytes / GIB, p->max_concurrency,
             (long long)p->max_model_len);
}

int sched_check_startup(const struct sched_cfg *cfg)
{
    if (!cfg->model[0] && !cfg->model_config[0])
        return 0;
    struct kv_plan p;
    char err[1024];
    int rc = sched_check_plan(cfg, NULL, &p, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "tern-scheduler: %s\n", err);
        return rc;
    }
    sched_check_log(&p);
    return 0;
}

bool sched_check_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--check") == 0)
            return true;
    }
    return false;
}

int sched_check_main(int argc, char **argv)
{
    /* rewrite: drop --check / --json, --config FILE names the model config here */
    char **av = xcalloc((size_t)argc + 1, sizeof *av);
    char *conf_eq = NULL;
    int n = 0;
    bool json = false;
    av[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0)
            continue;
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
            continue;
        }
        if (strcmp(argv[i], "--config") == 0) {
            av[n++] = (char *)"--model-config";
            continue;
        }
        if (strncmp(argv[i], "--config=", 9) == 0 && !conf_eq) {
            size_t len = strlen(argv[i]) + 8;
            conf_eq = xmalloc(len);
            snprintf(conf_eq, len, "--model-config=%s", argv[i] + 9);
            av[n++] = conf_eq;
            continue;
        }
        av[n++] = argv[i];
    }
    struct sched_cfg cfg;
    int code = 2;
    int rc = sched_cfg_parse(&cfg, n, av);
    if (rc > 0) {
        code = 0;
        goto out;
    }
    if (rc < 0)
        goto out;
    log_init("scheduler", LOG_LEVEL_WARN);
    struct kv_geom g;
    struct kv_plan p;
    char err[1024];
    rc = sched_check_plan(&cfg, &g, &p, err, sizeof err);
    sched_check_print(rc < 0 && !json ? stderr : stdout, &cfg, &g, &p, rc, err, json);
    code = rc == 0 ? 0 : rc == ERR_FULL ? 1 : 2;
out:
    free(conf_eq);
    free(av);
    return code;
}
