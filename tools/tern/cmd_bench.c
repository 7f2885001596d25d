/* tern bench: HTTP load generator against a running gateway, in the manner of vLLM's
 * `bench serve`. Flags -> one lg_cfg per point (one, or one per --sweep value) -> lg_run ->
 * text on stdout, optional JSON with every point, optional gnuplot PNG for a sweep.
 * Exit: 0 ran, 1 server unreachable / a point with no completed request / output failed,
 * 2 bad flags. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/args.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "loadgen/lg_http.h"
#include "loadgen/lg_report.h"
#include "loadgen/lg_run.h"

int tern_cmd_bench(int argc, char **argv);
const char tern_cmd_bench_help[] =
    "load-test a server: --url URL --prompt-len N --output-len N [--concurrency C | --rate R] "
    "[--requests N | --duration S] [--sweep VAR=v1,v2,..] [--json FILE] [--plot FILE.png]";

#define SWEEP_MAX 64

static const char NOTES[] =
    "  Closed loop at --concurrency (default 1) unless --rate R (Poisson arrivals; --concurrency\n"
    "  then caps the requests in flight). Default 16 requests.\n"
    "  --sweep VAR: concurrency | rate | prompt-len | output-len; one point per value, all in the\n"
    "  JSON, and a PNG of output tok/s and ITL p50 (--plot FILE, or the --json name with .png).\n"
    "  Exit: 0 ran, 1 server unreachable / a point with no completed request / output failed,\n"
    "  2 usage error.\n";

struct opts {
    struct lg_cfg cfg;
    const char *url, *json, *plot, *sweep_var, *api_key, *model;
    double sweep[SWEEP_MAX];
    int n_sweep;
    double timeout_s;
};

static int endpoint_arg(void *dst, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "completions") != 0 && strcmp(v, "chat") != 0) {
        snprintf(err, errlen, "\"%s\" is not completions|chat", v);
        return ERR_INVAL;
    }
    *(enum lg_endpoint *)dst = strcmp(v, "chat") == 0 ? LG_ENDPOINT_CHAT : LG_ENDPOINT_COMPLETIONS;
    return 0;
}

/* VAR=v1,v2,...: positive integers, or positive numbers for rate */
static int sweep_arg(void *dst, const char *arg, char *err, size_t errlen)
{
    static const char *const vars[] = {"concurrency", "rate", "prompt-len", "output-len"};
    struct opts *o = dst;
    const char *eq = strchr(arg, '=');
    if (o->sweep_var) {
        snprintf(err, errlen, "given twice");
        return ERR_INVAL;
    }
    if (!eq) {
        snprintf(err, errlen, "wants VAR=v1,v2,... (got \"%s\")", arg);
        return ERR_INVAL;
    }
    size_t vl = (size_t)(eq - arg);
    for (size_t i = 0; i < ARRAY_LEN(vars); i++)
        if (strlen(vars[i]) == vl && strncmp(arg, vars[i], vl) == 0)
            o->sweep_var = vars[i];
    if (!o->sweep_var) {
        snprintf(err, errlen, "unknown variable in \"%s\" (concurrency|rate|prompt-len|output-len)",
                 arg);
        return ERR_INVAL;
    }
    const bool is_rate = strcmp(o->sweep_var, "rate") == 0;
    char *list = xstrdup(eq + 1), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(list, ",", &save); rc == 0 && t; t = strtok_r(NULL, ",", &save)) {
        double v;
        int64_t iv;
        if (o->n_sweep == SWEEP_MAX) {
            snprintf(err, errlen, "more than %d values", SWEEP_MAX);
            rc = ERR_INVAL;
        } else if (is_rate) {
            rc = args_parse_double(o->sweep_var, t, 1e-9, 1e9, &v, err, errlen);
            o->sweep[o->n_sweep++] = v;
        } else {
            rc = args_parse_i64(o->sweep_var, t, 1, 1000000000, &iv, err, errlen);
            o->sweep[o->n_sweep++] = (double)iv;
        }
    }
    free(list);
    if (rc == 0 && o->n_sweep == 0) {
        snprintf(err, errlen, "no values in \"%s\"", arg);
        rc = ERR_INVAL;
    }
    return rc;
}

/* the checks between flags, after parsing: -1 to go on, else the exit code */
static int check(struct opts *o, const struct args_spec *spec)
{
    struct lg_cfg *c = &o->cfg;
    c->timeout_ms = (int)(o->timeout_s * 1000);
    if (o->model && strlen(o->model) >= sizeof(c->model))
        return args_fail(spec, "--model: \"%.40s\" is too long", o->model);
    if (o->model)
        snprintf(c->model, sizeof(c->model), "%s", o->model);
    if (c->prompt_len == 0)
        return args_fail(spec, "--prompt-len N is required");
    if (c->output_len == 0)
        return args_fail(spec, "--output-len N is required");
    if (c->requests > 0 && c->duration_s > 0)
        return args_fail(spec, "give --requests or --duration, not both");
    if (c->requests == 0 && c->duration_s == 0)
        c->requests = 16;
    bool sweep_rate = o->sweep_var && strcmp(o->sweep_var, "rate") == 0;
    if (c->concurrency < 0)
        c->concurrency = c->rate > 0 || sweep_rate ? 0 : 1;
    if (o->plot && !o->sweep_var)
        return args_fail(spec, "--plot needs --sweep");
    int rc = lg_url_parse(&c->url, o->url);
    if (rc == ERR_INVAL)
        return args_fail(spec, "--url wants http://host[:port], not '%s'", o->url);
    if (rc < 0) {
        fprintf(stderr, "tern bench: cannot resolve the host of %s\n", o->url);
        return 1;
    }
    if (o->api_key && strlen(o->api_key) >= sizeof(c->url.api_key))
        return args_fail(spec, "--api-key is too long");
    if (o->api_key)
        snprintf(c->url.api_key, sizeof(c->url.api_key), "%s", o->api_key);
    return -1;
}

/* -1 to go on, else the exit code (after the help or one line on stderr) */
static int parse(struct opts *o, int argc, char **argv)
{
    struct lg_cfg *c = &o->cfg;
    memset(o, 0, sizeof(*o));
    o->url = "http://127.0.0.1:8000";
    o->api_key = getenv("OPENAI_API_KEY");
    c->temperature = -1;
    o->timeout_s = 600;
    c->concurrency = -1;
    const int big = 1000000000;
    const struct args_opt opts[] = {
        ARGS_STR("--url", "URL", &o->url, "server (http://127.0.0.1:8000)"),
        ARGS_STR("--model", "NAME", &o->model, "\"model\" of each request (none sent)"),
        ARGS_FN("--endpoint", "completions|chat", &c->endpoint, endpoint_arg,
                "which API (completions)"),
        ARGS_INT("--prompt-len", "N", &c->prompt_len, 1, big, "prompt tokens (required)"),
        ARGS_INT("--output-len", "N", &c->output_len, 1, big, "max_tokens (required)"),
        ARGS_INT("--concurrency", "C", &c->concurrency, 1, big, "requests in flight (1)"),
        ARGS_DOUBLE("--rate", "R", &c->rate, 1e-9, 1e9, "Poisson arrivals, requests/s (off)"),
        ARGS_INT("--requests", "N", &c->requests, 1, big, "requests per point (16)"),
        ARGS_DOUBLE("--duration", "S", &c->duration_s, 1e-3, 1e9,
                    "run this long instead, seconds"),
        ARGS_DOUBLE("--temperature", "T", &c->temperature, 0, 2, "sent when given"),
        ARGS_BOOL("--ignore-eos", &c->ignore_eos, "send ignore_eos: true"),
        ARGS_U64("--seed", "S", &c->seed, "prompt generator seed (0)"),
        ARGS_DOUBLE("--timeout", "S", &o->timeout_s, 1e-3, 86400, "per request, seconds (600)"),
        ARGS_STR("--api-key", "KEY", &o->api_key, "bearer key (default $OPENAI_API_KEY)"),
        ARGS_STR("--json", "FILE", &o->json, "every point as JSON"),
        ARGS_FN("--sweep", "VAR=v1,v2,..", o, sweep_arg, "one point per value"),
        ARGS_STR("--plot", "FILE.png", &o->plot, "gnuplot PNG of a sweep"),
    };
    const struct args_spec spec = {"tern bench", "--prompt-len N --output-len N [options]", opts,
                                   ARRAY_LEN(opts), NOTES};
    int rc = args_parse(&spec, argc, argv);
    return rc != 0 ? args_exit(rc) : check(o, &spec);
}

/* GET path as JSON; NULL with err set when the server does not answer 200 + JSON */
static cJSON *get_json(const struct lg_url *u, const char *path, char *err, size_t errlen)
{
    int status;
    char *body = NULL;
    if (lg_http_fetch(u, "GET", path, NULL, 10000, &status, &body, err, errlen) < 0)
        return NULL;
    cJSON *j = status == 200 ? cJSON_Parse(body) : NULL;
    if (!j)
        snprintf(err, errlen, "GET %s: status %d", path, status);
    free(body);
    return j;
}

static void apply_sweep(struct lg_cfg *c, const char *var, double v)
{
    if (strcmp(var, "concurrency") == 0)
        c->concurrency = (int)v;
    else if (strcmp(var, "rate") == 0)
        c->rate = v;
    else if (strcmp(var, "prompt-len") == 0)
        c->prompt_len = (int)v;
    else
        c->output_len = (int)v;
}

static char *command_line(int argc, char **argv)
{
    size_t n = 8;
    for (int i = 0; i < argc; i++)
        n += strlen(argv[i]) + 1;
    char *s = xmalloc(n);
    size_t o = (size_t)snprintf(s, n, "tern");
    for (int i = 0; i < argc; i++)
        o += (size_t)snprintf(s + o, n - o, " %s", argv[i]);
    return s;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* FILE.json -> FILE.png */
static void png_name(char *out, size_t n, const char *json)
{
    size_t l = strlen(json);
    if (l > 5 && strcmp(json + l - 5, ".json") == 0)
        l -= 5;
    snprintf(out, n, "%.*s.png", (int)l, json);
}

int tern_cmd_bench(int argc, char **argv)
{
    struct opts o;
    int rc = parse(&o, argc, argv);
    if (rc >= 0)
        return rc;
    char err[512];
    cJSON *version = get_json(&o.cfg.url, "/version", err, sizeof(err));
    if (!version) {
        fprintf(stderr, "tern bench: cannot reach %s: %s\n", o.url, err);
        return 1;
    }
    cJSON *models = get_json(&o.cfg.url, "/v1/models", err, sizeof(err));
    cJSON *data = cJSON_DetachItemFromObjectCaseSensitive(models, "data");
    cJSON_Delete(models);
    cJSON *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 0), "id");
    if (!o.cfg.model[0] && cJSON_IsString(id))
        snprintf(o.cfg.model, sizeof(o.cfg.model), "%s", id->valuestring);

    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    char *cmd = command_line(argc, argv);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "command", cmd);
    cJSON_AddStringToObject(doc, "date", date);
    cJSON_AddStringToObject(doc, "url", o.url);
    cJSON_AddItemToObject(doc, "server_version", version);
    cJSON_AddItemToObject(doc, "server_models", data ? data : cJSON_CreateNull());
    cJSON_AddStringToObject(doc, "model", o.cfg.model);
    free(cmd);
    if (o.sweep_var) {
        cJSON *sw = cJSON_AddObjectToObject(doc, "sweep");
        cJSON_AddStringToObject(sw, "variable", o.sweep_var);
        cJSON_AddItemToObject(sw, "values", cJSON_CreateDoubleArray(o.sweep, o.n_sweep));
    } else {
        cJSON_AddNullToObject(doc, "sweep");
    }
    cJSON *points = cJSON_AddArrayToObject(doc, "points");

    int n_points = o.sweep_var ? o.n_sweep : 1;
    struct lg_result *res = xcalloc((size_t)n_points, sizeof(*res));
    int status = 0;
    bool run_failed = false;
    for (int i = 0; i < n_points; i++) {
        struct lg_cfg c = o.cfg;
        if (o.sweep_var)
            apply_sweep(&c, o.sweep_var, o.sweep[i]);
        rc = lg_run(&c, &res[i], err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "tern bench: %s\n", err);
            status = 1;
            run_failed = true;
            break;
        }
        lg_report_print(stdout, &c, &res[i]);
        fflush(stdout);
        cJSON *p = lg_report_point_json(&c, &res[i]);
        if (o.sweep_var)
            cJSON_AddNumberToObject(p, "sweep_value", o.sweep[i]);
        cJSON_AddItemToArray(points, p);
        if (res[i].completed == 0)
            status = 1;
    }
    if (o.json) {
        char *s = cJSON_Print(doc);
        if (write_file(o.json, s) < 0) {
            fprintf(stderr, "tern bench: cannot write %s\n", o.json);
            status = 1;
        }
        free(s);
    }
    char png[1024];
    if (!run_failed && o.sweep_var && (o.plot || o.json)) {
        if (o.plot)
            snprintf(png, sizeof(png), "%s", o.plot);
        else
            png_name(png, sizeof(png), o.json);
        bool logx = strcmp(o.sweep_var, "rate") != 0 && o.sweep[0] > 0;
        for (int i = 1; i < o.n_sweep; i++)
            logx = logx && o.sweep[i] >= 2 * o.sweep[i - 1];
        if (lg_report_plot(png, o.sweep_var, o.sweep, res, (size_t)o.n_sweep, logx, err,
                           sizeof(err)) < 0) {
            fprintf(stderr, "tern bench: plot: %s\n", err);
            status = 1;
        } else {
            printf("plot: %s\n", png);
        }
    }
    free(res);
    cJSON_Delete(doc);
    return status;
}
