/* gw_route: method + path -> handler, API-key check, and the small endpoints (/health,
 * /version, /v1/models, /metrics). Unknown path 404, known path with the wrong method 405 +
 * Allow. /health and /metrics are open unless --auth-metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <llhttp.h>

#include "common/clock.h"
#include "gw.h"
#include "common/buf.h"
#include "gw_metrics.h"
#include "gw_openai.h"
#include "gw_responses.h"
#include "gw_route.h"
#include "gw_sched.h"

#ifndef TERN_VERSION
#define TERN_VERSION "0.0.0"
#endif

enum route_id {
    ROUTE_CHAT,
    ROUTE_COMPLETIONS,
    ROUTE_RESPONSES,
    ROUTE_MODELS,
    ROUTE_MODEL,
    ROUTE_HEALTH,
    ROUTE_VERSION,
    ROUTE_TOKENIZE,
    ROUTE_DETOKENIZE,
    ROUTE_METRICS,
};

struct route {
    const char *path; /* exact, or prefix when ending in '/' */
    int method;       /* llhttp method */
    enum route_id id;
    bool open;        /* no API key needed */
    const char *name; /* metrics handler label */
};

static const struct route routes[] = {
    {"/v1/chat/completions", HTTP_POST, ROUTE_CHAT, false, "/v1/chat/completions"},
    {"/v1/completions", HTTP_POST, ROUTE_COMPLETIONS, false, "/v1/completions"},
    {"/v1/responses", HTTP_POST, ROUTE_RESPONSES, false, "/v1/responses"},
    {"/v1/models", HTTP_GET, ROUTE_MODELS, false, "/v1/models"},
    {"/v1/models/", HTTP_GET, ROUTE_MODEL, false, "/v1/models/{id}"},
    {"/health", HTTP_GET, ROUTE_HEALTH, true, "/health"},
    {"/version", HTTP_GET, ROUTE_VERSION, true, "/version"},
    {"/tokenize", HTTP_POST, ROUTE_TOKENIZE, false, "/tokenize"},
    {"/detokenize", HTTP_POST, ROUTE_DETOKENIZE, false, "/detokenize"},
    {"/metrics", HTTP_GET, ROUTE_METRICS, true, "/metrics"},
};

static bool path_matches(const struct route *r, const char *path)
{
    size_t n = strlen(r->path);
    if (r->path[n - 1] == '/')
        return strncmp(path, r->path, n) == 0 && path[n] != '\0' && !strchr(path + n, '/');
    return strcmp(path, r->path) == 0;
}

/* constant-time comparison of the full strings (length leaks, content does not) */
static bool key_equal(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < na; i++)
        d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
    return d == 0;
}

static bool authorized(const struct gw *gw, const struct gw_exch *x)
{
    const struct gw_cfg *cfg = gw->cfg;
    if (cfg->n_api_keys == 0)
        return true;
    const char *h = gw_exch_header(x, "authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    const char *key = h + 7;
    while (*key == ' ')
        key++;
    bool ok = false;
    for (int i = 0; i < cfg->n_api_keys; i++)
        ok |= key_equal(key, cfg->api_keys[i]); /* no early exit */
    return ok;
}

/* CORS (off unless --allowed-origins): the value for Access-Control-Allow-Origin, or NULL */
static const char *cors_allow(const struct gw *gw, const char *origin)
{
    const char *list = gw->cfg->allowed_origins;
    if (!origin || !list[0])
        return NULL;
    size_t no = strlen(origin);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m && p[m - 1] == ' ')
            m--;
        if (m == 1 && p[0] == '*')
            return "*";
        if (m && m == no && strncasecmp(p, origin, m) == 0)
            return origin;
        p += n;
    }
    return NULL;
}

/* answer a CORS preflight (OPTIONS + Origin + Access-Control-Request-Method); false when the
 * request is not one (CORS off, or a plain OPTIONS) */
static bool cors_preflight(struct gw *gw, struct gw_exch *x)
{
    const char *origin = gw_exch_header(x, "origin");
    if (x->method != HTTP_OPTIONS || !gw->cfg->allowed_origins[0] || !origin ||
        !gw_exch_header(x, "access-control-request-method"))
        return false;
    x->route = "preflight";
    if (!x->cors_origin) {
        gw_exch_error(x, 403, "invalid_request_error", NULL, "origin_not_allowed", NULL,
                      "CORS origin '%.200s' is not allowed", origin);
        return true;
    }
    const char *req_hdrs = gw_exch_header(x, "access-control-request-headers");
    char hdr[1024];
    snprintf(hdr, sizeof(hdr),
             "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
             "Access-Control-Allow-Headers: %.600s\r\nAccess-Control-Max-Age: 600\r\n",
             req_hdrs && !strpbrk(req_hdrs, "\r\n") ? req_hdrs
                                                    : "Authorization, Content-Type, X-Request-Id");
    gw_exch_respond(x, 200, "text/plain", hdr, "", 0);
    return true;
}

static void respond_json(struct gw_exch *x, int status, cJSON *j, const char *extra)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    gw_exch_respond(x, status, "application/json", extra, s, strlen(s));
    free(s);
}

static cJSON *model_card(const struct gw *gw, const char *id)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)gw->started_s); /* process start */
    cJSON_AddStringToObject(m, "owned_by", "tern");
    cJSON_AddStringToObject(m, "root", id);
    cJSON_AddNullToObject(m, "parent");
    cJSON_AddNumberToObject(m, "max_model_len", (double)gw_openai_max_model_len(gw));
    return m;
}

static void handle_models(struct gw *gw, struct gw_exch *x)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(j, "data");
    cJSON_AddItemToArray(data, model_card(gw, gw_openai_model(gw)));
    respond_json(x, 200, j, NULL);
}

static void handle_model(struct gw *gw, struct gw_exch *x)
{
    const char *id = x->path + strlen("/v1/models/");
    if (strcmp(id, gw_openai_model(gw)) != 0) {
        gw_exch_error(x, 404, "invalid_request_error", "model", "model_not_found", NULL,
                      "The model '%.128s' does not exist.", id);
        return;
    }
    respond_json(x, 200, model_card(gw, id), NULL);
}

static void handle_health(struct gw *gw, struct gw_exch *x)
{
    struct gw_sched_status st;
    gw_sched_status_get(gw->sched, &st);
    uint64_t now = clock_now_ms();
    bool fresh = st.snapshot_ms && now - st.snapshot_ms < 2000;
    char hdr[64];
    snprintf(hdr, sizeof(hdr), "Retry-After: %d\r\n", gw->cfg->retry_after_s);
    if (gw->draining) {
        gw_exch_error(x, 503, "server_error", NULL, "shutting_down", hdr,
                      "the gateway is shutting down");
    } else if (!st.up) {
        gw_exch_error(x, 503, "server_error", NULL, "scheduler_unavailable", hdr,
                      "the scheduler is not reachable");
    } else if (!fresh || st.workers_ready == 0) {
        gw_exch_error(x, 503, "server_error", NULL, "no_worker_ready", hdr, "no worker is ready");
    } else {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "status", "ok");
        cJSON_AddNumberToObject(j, "workers_ready", st.workers_ready);
        respond_json(x, 200, j, NULL);
    }
}

static void handle_version(struct gw_exch *x)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "version", TERN_VERSION);
    respond_json(x, 200, j, NULL);
}

static void handle_metrics(struct gw *gw, struct gw_exch *x)
{
    struct gw_sched_status st;
    gw_sched_status_get(gw->sched, &st);
    struct gw_metrics_sched ms = {.up = st.up,
                                  .workers_ready = st.workers_ready,
                                  .running = st.running,
                                  .waiting = st.waiting,
                                  .kv_usage = st.kv_usage,
                                  .num_preemptions = st.preemptions,
                                  .spec_drafts = st.spec_drafts,
                                  .spec_draft_tokens = st.spec_draft_tokens,
                                  .spec_accepted_tokens = st.spec_accepted_tokens,
                                  .spec_accepted_per_pos = st.spec_accepted_per_pos,
                                  .n_spec_pos = st.n_spec_pos};
    struct buf b;
    buf_init(&b);
    gw_metrics_render(gw->metrics, &ms, &b);
    struct gw_metrics_proc proc;
    (void)gw_metrics_process_read(&proc); /* what could not be read is left out */
    gw_metrics_render_process(&proc, &b);
    gw_exch_respond(x, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b.data, b.len);
    buf_deinit(&b);
}

void gw_route_dispatch(struct gw *gw, struct gw_exch *x)
{
    const struct route *hit = NULL;
    bool path_known = false;
    x->cors_origin = cors_allow(gw, gw_exch_header(x, "origin"));
    if (cors_preflight(gw, x))
        return;
    char allow[64] = "";
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        const struct route *r = &routes[i];
        if (!path_matches(r, x->path))
            continue;
        path_known = true;
        if (r->method == x->method || (r->method == HTTP_GET && x->method == HTTP_HEAD)) {
            hit = r;
            break;
        }
        snprintf(allow, sizeof(allow), "%s", llhttp_method_name((llhttp_method_t)r->method));
    }
    if (!hit) {
        x->route = path_known ? "method_not_allowed" : "not_found";
        if (path_known) {
            char hdr[96];
            snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allow);
            gw_exch_error(x, 405, "invalid_request_error", NULL, NULL, hdr,
                          "method %s is not allowed on %s", x->method_name, x->path);
        } else {
            gw_exch_error(x, 404, "invalid_request_error", NULL, NULL, NULL,
                          "no route for %s %.200s", x->method_name, x->path);
        }
        return;
    }
    x->route = hit->name;
    bool open = hit->open && !(hit->id == ROUTE_METRICS && gw->cfg->auth_metrics);
    if (!open && !authorized(gw, x)) {
        gw_exch_error(x, 401, "invalid_request_error", NULL, "invalid_api_key",
                      "WWW-Authenticate: Bearer\r\n", "Incorrect or missing API key.");
        return;
    }
    switch (hit->id) {
    case ROUTE_CHAT:
        gw_openai_generate(gw, x, GW_REQ_KIND_CHAT);
        break;
    case ROUTE_COMPLETIONS:
        gw_openai_generate(gw, x, GW_REQ_KIND_COMPLETION);
        break;
    case ROUTE_RESPONSES:
        gw_responses_handle(gw, x);
        break;
    case ROUTE_MODELS:
        handle_models(gw, x);
        break;
    case ROUTE_MODEL:
        handle_model(gw, x);
        break;
    case ROUTE_HEALTH:
        handle_health(gw, x);
        break;
    case ROUTE_VERSION:
        handle_version(x);
        break;
    case ROUTE_TOKENIZE:
        gw_openai_tokenize(gw, x);
        break;
    case ROUTE_DETOKENIZE:
        gw_openai_detokenize(gw, x);
        break;
    case ROUTE_METRICS:
        handle_metrics(gw, x);
        break;
    }
}
