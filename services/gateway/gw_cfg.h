/* gw_cfg: the gateway's whole configuration: defaults, then TERN_* environment, then flags
 * (later wins), validated in one place (DESIGN.md "Configuration"). */
#ifndef GW_CFG_H
#define GW_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/curve.h"

#define GW_CFG_KEYS_MAX 16

struct gw_cfg {
    struct curve_link_cfg curve; /* --curve-secret, --curve-server-pub, --insecure-tcp */
    char host[64];            /* listen address, default 127.0.0.1 */
    int port;                 /* listen port, default 8000 (0 = any free port) */
    char sched_endpoint[256]; /* scheduler's gateway ROUTER endpoint */
    char model_name[128];     /* served model id, default "qwen3.6-35b-a3b" */
    int64_t max_model_len;    /* tokens; used until the scheduler reports one, default 32768 */
    char tokenizer_dir[512];  /* folder with tokenizer.json + tokenizer_config.json */
    char generation_config[512]; /* sampling defaults: "auto" (the tokenizer folder's
                                    generation_config.json, if any), "vllm" (off: OpenAI
                                    defaults) or a folder holding one; default auto */
    char api_key_list[2048];  /* --api-key (repeatable) / TERN_API_KEY, comma-separated */
    char api_key_file[512];   /* --api-key-file: one key per line */
    char *api_keys[GW_CFG_KEYS_MAX]; /* accepted bearer keys, from the two above (owned) */
    int n_api_keys;
    bool auth_metrics;                  /* also guard /metrics with the key, default false */
    char allowed_origins[1024];         /* CORS: comma-separated origins or "*"; "" = CORS off */
    char default_template_kwargs[2048]; /* JSON object merged under chat_template_kwargs */
    bool exclude_tools_none;            /* tool_choice "none": leave tools out of the prompt (vLLM's
                                           --exclude-tools-when-tool-choice-none), default false */
    int sse_ping_ms;           /* ": ping" comment on a quiet stream, ms; 0 = off, default 10000 */
    int max_conns;             /* open connections cap, default 1024 */
    int64_t body_max;          /* request body limit, bytes, default 4 MiB */
    int64_t url_max;           /* request line (URL) limit, bytes, default 8 KiB */
    int64_t header_field_max;  /* one header line, bytes, default 8 KiB */
    int64_t headers_total_max; /* all headers, bytes, default 32 KiB */
    int headers_max;           /* header count, default 100 */
    int header_timeout_ms;     /* whole header deadline, default 10000 */
    int body_idle_ms;          /* max gap between body reads, default 30000 */
    int keepalive_ms;          /* idle keep-alive connection, default 60000 */
    int drain_ms;              /* SIGTERM drain deadline, default 30000 */
    int retry_after_s;         /* Retry-After on 503, default 1 */
    int sched_dead_ms;         /* scheduler considered gone after this silence, default 3000 */
    int sched_resume_ms;       /* open streams wait this long for a scheduler to come back and
                                  continue from their tokens so far; 0 = fail them at once;
                                  default 15000 */
    char log_level_name[16];   /* debug|info|warn|error, default info */
    int log_level;             /* enum log_level, from log_level_name */
    bool check_config;         /* --check-config: validate, print, exit */
};

/* Fill defaults, apply TERN_GW_* environment, then argv. Returns 0, 1 for --help/--check-config
 * done (caller exits 0), or ERR_INVAL (message printed on stderr; caller exits 2). */
int gw_cfg_parse(struct gw_cfg *cfg, int argc, char **argv);
/* One log line with the effective configuration (keys are not printed). */
void gw_cfg_log(const struct gw_cfg *cfg);
void gw_cfg_deinit(struct gw_cfg *cfg);

#endif
