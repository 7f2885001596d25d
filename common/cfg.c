/* cfg: defaults < file < environment < flags, driven by a table of cfg_opt (see cfg.h). */
#include "common/cfg.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/err.h"

#define CFG_LINE_MAX 1024

static const struct cfg_opt *find_opt(const struct cfg_opt *opts, size_t n, const char *name,
                                      size_t name_len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i].name) == name_len && strncmp(opts[i].name, name, name_len) == 0)
            return &opts[i];
    return NULL;
}

int cfg_set(void *cfg, const struct cfg_opt *opt, const char *value, char *err, size_t errlen)
{
    char *field = (char *)cfg + opt->offset;
    switch (opt->type) {
    case CFG_TYPE_STR:
        if (strlen(value) >= opt->size) {
            snprintf(err, errlen, "%s: value longer than %zu bytes", opt->name, opt->size - 1);
            return ERR_INVAL;
        }
        memcpy(field, value, strlen(value) + 1);
        return 0;
    case CFG_TYPE_INT:
    case CFG_TYPE_I64: {
        const bool bounded = opt->min || opt->max;
        const bool is_int = opt->type == CFG_TYPE_INT;
        int64_t v;
        int rc = args_parse_i64(opt->name, value,
                                bounded ? opt->min : is_int ? INT32_MIN : INT64_MIN,
                                bounded ? opt->max : is_int ? INT32_MAX : INT64_MAX, &v, err,
                                errlen);
        if (rc < 0)
            return rc;
        if (is_int)
            *(int *)field = (int)v;
        else
            *(int64_t *)field = v;
        return 0;
    }
    case CFG_TYPE_DOUBLE: {
        double d;
        int rc = args_parse_double(opt->name, value, -DBL_MAX, DBL_MAX, &d, err, errlen);
        if (rc == 0)
            *(double *)field = d;
        return rc;
    }
    case CFG_TYPE_BOOL: {
        bool b;
        if (args_parse_bool(value, &b) < 0) {
            snprintf(err, errlen, "%s: not a boolean: \"%s\"", opt->name, value);
            return ERR_INVAL;
        }
        *(bool *)field = b;
        return 0;
    }
    }
    snprintf(err, errlen, "%s: bad option type", opt->name);
    return ERR_INVAL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* key=value lines; '#' starts a comment line; keys are option names. */
static int apply_file(void *cfg, const struct cfg_opt *opts, size_t n, const char *path, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "config file %s: %s", path, strerror(errno));
        return ERR_INVAL;
    }
    char line[CFG_LINE_MAX];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected key=value", path, lineno);
            rc = ERR_INVAL;
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        size_t vl = strlen(val);
        if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
            val[vl - 1] = '\0';
            val++;
        }
        const struct cfg_opt *o = find_opt(opts, n, key, strlen(key));
        if (!o) {
            snprintf(err, errlen, "%s:%d: unknown key \"%s\"", path, lineno, key);
            rc = ERR_INVAL;
            break;
        }
        rc = cfg_set(cfg, o, val, err, errlen);
        if (rc < 0)
            break;
    }
    fclose(f);
    return rc;
}

int cfg_parse(void *cfg, const struct cfg_opt *opts, size_t n_opts, int argc, char **argv,
              const char *config_env, struct cfg_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    err[0] = '\0';
    /* 1. the file: --config wins over the env variable */
    const char *file = config_env ? getenv(config_env) : NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            file = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
    }
    if (file && file[0]) {
        int rc = apply_file(cfg, opts, n_opts, file, err, errlen);
        if (rc < 0)
            return rc;
    }
    /* 2. the environment */
    for (size_t i = 0; i < n_opts; i++) {
        const char *v = opts[i].env ? getenv(opts[i].env) : NULL;
        if (!v)
            continue;
        int rc = cfg_set(cfg, &opts[i], v, err, errlen);
        if (rc < 0) {
            size_t l = strlen(err);
            snprintf(err + l, errlen - l, " (from %s)", opts[i].env);
            return rc;
        }
    }
    /* 3. flags */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            res->n_rest = argc - i - 1;
            res->rest = res->n_rest ? &argv[i + 1] : NULL;
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            res->help = true;
            continue;
        }
        if (strcmp(a, "--check-config") == 0) {
            res->check_config = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument \"%s\"", a);
            return ERR_INVAL;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        if (nl == 6 && strncmp(name, "config", 6) == 0) {
            if (!eq)
                i++;
            continue;
        }
        const struct cfg_opt *o = find_opt(opts, n_opts, name, nl);
        if (!o) {
            snprintf(err, errlen, "unknown flag \"%.*s\"", (int)nl + 2, a);
            return ERR_INVAL;
        }
        const char *val;
        if (eq)
            val = eq + 1;
        else if (o->type == CFG_TYPE_BOOL && (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0))
            val = "true";
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            snprintf(err, errlen, "flag %s needs a value", a);
            return ERR_INVAL;
        }
        int rc = cfg_set(cfg, o, val, err, errlen);
        if (rc < 0) {
            /* name the flag as it was typed: "--heartbeat-ms: not an integer: ..." */
            char msg[512];
            snprintf(msg, sizeof msg, "--%s", err);
            snprintf(err, errlen, "%s", msg);
            return rc;
        }
    }
    return 0;
}

void cfg_format(const void *cfg, const struct cfg_opt *opts, size_t n_opts, char *buf, size_t len)
{
    size_t o = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < n_opts && o < len; i++) {
        const char *field = (const char *)cfg + opts[i].offset;
        const char *sep = i ? " " : "";
        int w = 0;
        switch (opts[i].type) {
        case CFG_TYPE_STR:
            if (strchr(field, ' ') || field[0] == '\0')
                w = snprintf(buf + o, len - o, "%s%s=\"%s\"", sep, opts[i].name, field);
            else
                w = snprintf(buf + o, len - o, "%s%s=%s", sep, opts[i].name, field);
            break;
        case CFG_TYPE_INT:
            w = snprintf(buf + o, len - o, "%s%s=%d", sep, opts[i].name, *(const int *)field);
            break;
        case CFG_TYPE_I64:
            w = snprintf(buf + o, len - o, "%s%s=%" PRId64, sep, opts[i].name,
                         *(const int64_t *)field);
            break;
        case CFG_TYPE_DOUBLE:
            w = snprintf(buf + o, len - o, "%s%s=%g", sep, opts[i].name, *(const double *)field);
            break;
        case CFG_TYPE_BOOL:
            w = snprintf(buf + o, len - o, "%s%s=%s", sep, opts[i].name,
                         *(const bool *)field ? "true" : "false");
            break;
        }
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

void cfg_usage(FILE *f, const char *prog, const struct cfg_opt *opts, size_t n_opts)
{
    fprintf(f, "usage: %s [--config FILE] [--check-config] [--flag value ...]\n", prog);
    fprintf(f, "  --%-22s %-30s %s\n", "config FILE", "", "key=value file (flags win over it)");
    fprintf(f, "  --%-22s %-30s %s\n", "check-config", "",
            "validate and load what startup loads, log the config, exit 0 (2 on errors)");
    fprintf(f, "  --%-22s %-30s %s\n", "help, -h", "", "this help");
    for (size_t i = 0; i < n_opts; i++)
        fprintf(f, "  --%-22s %-30s %s\n", opts[i].name, opts[i].env ? opts[i].env : "",
                opts[i].help ? opts[i].help : "");
}
