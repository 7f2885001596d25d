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

static const char usage[] =
    "usage: tern bench [--url http://127.0.0.1:8000] [--model NAME] [--endpoint completions|chat]\n"
    "                  --prompt-len N --output-len N [--concurrency C] [--rate R]\n"
    "                  [--requests N | --duration S] [--temperature T] [--ignore-eos] [--seed S]\n"
    "                  [--timeout S] [--api-key KEY] [--json FILE] [--sweep VAR=v1,v2,...]\n"
    "                  [--plot FILE.png]\n"
    "  Closed loop at --concurrency (default 1) unless --rate R (Poisson arrivals; --concurrency\n"
    "  then caps the requests in flight). Default 16 requests. --api-key: default "
    "$OPENAI_API_KEY.\n"
    "  --sweep VAR: concurrency | rate | prompt-len | output-len; one point per value, all in the\n"
    "  JSON, and a PNG of output tok/s and ITL p50 (--plot FILE, or the --json name with .png).\n";

struct opts {
    struct lg_cfg cfg;
    const char *url, *json, *plot, *sweep_var, *api_key;
    double sweep[SWEEP_MAX];
    int n_sweep;
};

#define PARSE_HELP (-1) /* parse() saw --help */

__attribute__((format(printf, 1, 2))) static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tern bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see tern bench --help)\n");
    va_end(ap);
    return 2;
}

/* strict number parsing: the whole string, finite */
static bool num(const char *s, double *v)
{
    char *e;
    if (!s || !*s)
        return false;
    *v = strtod(s, &e);
    return *e == '\0' && isfinite(*v);
}

static bool pos_int(const char *s, int *v)
{
    double d;
    if (!num(s, &d) || d < 1 || d > 1e9 || d != floor(d))
        return false;
    *v = (int)d;
    return true;
}

static int parse_sweep(struct opts *o, const char *arg)
{
    static const char *const vars[] = {"concurrency", "rate", "prompt-len", "output-len"};
    const char *eq = strchr(arg, '=');
    if (!eq)
        return bad("--sweep wants VAR=v1,v2,... (got '%s')", arg);
    size_t vl = (size_t)(eq - arg);
    for (size_t i = 0; i < ARRAY_LEN(vars); i++)
        if (strlen(vars[i]) == vl && strncmp(arg, vars[i], vl) == 0)
            o->sweep_var = vars[i];
    if (!o->sweep_var)
        return bad("--sweep: unknown variable in '%s' (concurrency|rate|prompt-len|output-len)",
                   arg);
    char *list = xstrdup(eq + 1), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        double v;
        bool is_rate = strcmp(o->sweep_var, "rate") == 0;
        int iv;
        if (o->n_sweep == SWEEP_MAX || (is_rate ? !num(t, &v) || v <= 0 : !pos_int(t, &iv))) {
            rc = bad("--sweep: bad value list '%s'", arg);
            break;
        }
        o->sweep[o->n_sweep++] = is_rate ? v : iv;
    }
    free(list);
    if (rc == 0 && o->n_sweep == 0)
        rc = bad("--sweep: no values in '%s'", arg);
    return rc;
}

static int parse(struct opts *o, int argc, char **argv)
{
    struct lg_cfg *c = &o->cfg;
    memset(o, 0, sizeof(*o));
    o->url = "http://127.0.0.1:8000";
    c->temperature = -1;
    c->timeout_ms = 600000;
    c->concurrency = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return PARSE_HELP;
        }
        if (strcmp(a, "--ignore-eos") == 0) {
            c->ignore_eos = true;
            continue;
        }
        static const char *const with_value[] = {
            "--url",   "--model",    "--endpoint", "--prompt-len",  "--output-len", "--concurrency",
            "--rate",  "--requests", "--duration", "--temperature", "--seed",       "--json",
            "--sweep", "--plot",     "--timeout",  "--api-key"};
        bool known = false;
        for (size_t k = 0; k < ARRAY_LEN(with_value); k++)
            known |= strcmp(a, with_value[k]) == 0;
        if (!known)
            return bad("unknown flag '%s'", a);
        if (!v)
            return bad("%s needs a value", a);
        i++;
        if (strcmp(a, "--url") == 0) {
            o->url = v;
        } else if (strcmp(a, "--model") == 0) {
            if (strlen(v) >= sizeof(c->model))
                return bad("--model '%.40s' is too long", v);
            snprintf(c->model, sizeof(c->model), "%s", v);
        } else if (strcmp(a, "--endpoint") == 0) {
            if (strcmp(v, "completions") == 0)
                c->endpoint = LG_ENDPOINT_COMPLETIONS;
            else if (strcmp(v, "chat") == 0)
                c->endpoint = LG_ENDPOINT_CHAT;
            else
                return bad("--endpoint must be completions or chat, not '%s'", v);
        } else if (strcmp(a, "--prompt-len") == 0) {
            if (!pos_int(v, &c->prompt_len))
                return bad("--prompt-len wants a positive integer, not '%s'", v);
        } else if (strcmp(a, "--output-len") == 0) {
            if (!pos_int(v, &c->output_len))
                return bad("--output-len wants a positive integer, not '%s'", v);
        } else if (strcmp(a, "--concurrency") == 0) {
            if (!pos_int(v, &c->concurrency))
                return bad("--concurrency wants a positive integer, not '%s'", v);
        } else if (strcmp(a, "--rate") == 0) {
            if (!num(v, &c->rate) || c->rate <= 0)
                return bad("--rate wants a positive number (requests/s), not '%s'", v);
        } else if (strcmp(a, "--requests") == 0) {
            if (!pos_int(v, &c->requests))
                return bad("--requests wants a positive integer, not '%s'", v);
        } else if (strcmp(a, "--duration") == 0) {
            if (!num(v, &c->duration_s) || c->duration_s <= 0)
                return bad("--duration wants a positive number of seconds, not '%s'", v);
        } else if (strcmp(a, "--temperature") == 0) {
            if (!num(v, &c->temperature) || c->temperature < 0 || c->temperature > 2)
                return bad("--temperature wants a number in [0, 2], not '%s'", v);
        } else if (strcmp(a, "--seed") == 0) {
            if (!num(v, &d) || d < 0 || d != floor(d) || d > 9e15)
                return bad("--seed wants a non-negative integer, not '%s'", v);
            c->seed = (uint64_t)d;
        } else if (strcmp(a, "--timeout") == 0) {
            if (!num(v, &d) || d <= 0 || d > 86400)
                return bad("--timeout wants seconds in (0, 86400], not '%s'", v);
            c->timeout_ms = (int)(d * 1000);
        } else if (strcmp(a, "--api-key") == 0) {
            o->api_key = v;
        } else if (strcmp(a, "--json") == 0) {
            o->json = v;
        } else if (strcmp(a, "--plot") == 0) {
            o->plot = v;
        } else if (strcmp(a, "--sweep") == 0) {
            if (o->sweep_var)
                return bad("%s", "--sweep given twice");
            int rc = parse_sweep(o, v);
            if (rc)
                return rc;
        }
    }
    if (c->prompt_len == 0)
        return bad("%s", "--prompt-len N is required");
    if (c->output_len == 0)
        return bad("%s", "--output-len N is required");
    if (c->requests > 0 && c->duration_s > 0)
        return bad("%s", "give --requests or --duration, not both");
    if (c->requests == 0 && c->duration_s == 0)
        c->requests = 16;
    bool sweep_rate = o->sweep_var && strcmp(o->sweep_var, "rate") == 0;
    if (c->concurrency < 0)
        c->concurrency = c->rate > 0 || sweep_rate ? 0 : 1;
    if (o->plot && !o->sweep_var)
        return bad("%s", "--plot needs --sweep");
    int rc = lg_url_parse(&c->url, o->url);
    if (rc == ERR_INVAL)
        return bad("--url wants http://host[:port], not '%s'", o->url);
    if (rc < 0) {
        fprintf(stderr, "tern bench: cannot resolve the host of %s\n", o->url);
        return 1;
    }
    if (!o->api_key)
        o->api_key = getenv("OPENAI_API_KEY");
    if (o->api_key && strlen(o->api_key) >= sizeof(c->url.api_key))
        return bad("%s", "--api-key is too long");
    if (o->api_key)
        snprintf(c->url.api_key, sizeof(c->url.api_key), "%s", o->api_key);
    return 0;
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
    if (rc)
        return rc == PARSE_HELP ? 0 : rc;
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
