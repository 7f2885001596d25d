/* args: table-driven flags for command-line tools (see args.h). */
#include "common/args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"

#define ARGS_ERR_MAX 512

int args_parse_i64(const char *name, const char *s, int64_t min, int64_t max, int64_t *out,
                   char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno == ERANGE || end == s || *end != '\0') {
        snprintf(err, errlen, "%s: not an integer: \"%s\"", name, s);
        return ERR_INVAL;
    }
    if (v < min || v > max) {
        snprintf(err, errlen, "%s: %lld out of range [%" PRId64 ", %" PRId64 "]", name, v, min,
                 max);
        return ERR_INVAL;
    }
    *out = (int64_t)v;
    return 0;
}

int args_parse_double(const char *name, const char *s, double min, double max, double *out,
                      char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    double d = strtod(s, &end);
    if (errno == ERANGE || end == s || *end != '\0' || !isfinite(d)) {
        snprintf(err, errlen, "%s: not a number: \"%s\"", name, s);
        return ERR_INVAL;
    }
    if (d < min || d > max) {
        snprintf(err, errlen, "%s: %g out of range [%g, %g]", name, d, min, max);
        return ERR_INVAL;
    }
    *out = d;
    return 0;
}

int args_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no",
                                                                                 "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            *out = strcasecmp(s, yes[i]) == 0;
            return 0;
        }
    }
    return ERR_INVAL;
}

static bool is_positional(const struct args_opt *o)
{
    return o->name[0] != '-';
}

/* the range limited to what the type holds */
static int64_t lo_of(const struct args_opt *o, int64_t type_min)
{
    return o->min > (double)type_min ? (int64_t)o->min : type_min;
}

static int64_t hi_of(const struct args_opt *o, int64_t type_max)
{
    return o->max < (double)type_max ? (int64_t)o->max : type_max;
}

static int set_value(const struct args_opt *o, const char *v, char *err, size_t errlen)
{
    int64_t i;
    double d;
    int rc = 0;
    switch (o->type) {
    case ARGS_TYPE_BOOL: {
        bool b;
        rc = args_parse_bool(v, &b);
        if (rc < 0)
            snprintf(err, errlen, "%s: not a boolean: \"%s\"", o->name, v);
        else
            *(bool *)o->dst = b;
        return rc;
    }
    case ARGS_TYPE_STR:
        *(const char **)o->dst = v;
        return 0;
    case ARGS_TYPE_INT:
        rc = args_parse_i64(o->name, v, lo_of(o, INT32_MIN), hi_of(o, INT32_MAX), &i, err, errlen);
        if (rc == 0)
            *(int *)o->dst = (int)i;
        return rc;
    case ARGS_TYPE_I64:
        rc = args_parse_i64(o->name, v, lo_of(o, INT64_MIN), hi_of(o, INT64_MAX), &i, err,
                            errlen);
        if (rc == 0)
            *(int64_t *)o->dst = i;
        return rc;
    case ARGS_TYPE_U64: {
        char *end = NULL;
        errno = 0;
        unsigned long long u = strtoull(v, &end, 0);
        if (errno == ERANGE || end == v || *end != '\0' || v[0] == '-') {
            snprintf(err, errlen, "%s: not a non-negative integer: \"%s\"", o->name, v);
            return ERR_INVAL;
        }
        *(uint64_t *)o->dst = (uint64_t)u;
        return 0;
    }
    case ARGS_TYPE_DOUBLE:
    case ARGS_TYPE_FLOAT:
        rc = args_parse_double(o->name, v, o->min, o->max, &d, err, errlen);
        if (rc == 0 && o->type == ARGS_TYPE_DOUBLE)
            *(double *)o->dst = d;
        else if (rc == 0)
            *(float *)o->dst = (float)d;
        return rc;
    case ARGS_TYPE_FN: {
        char why[ARGS_ERR_MAX / 2] = "bad value";
        rc = o->fn(o->dst, v, why, sizeof why);
        if (rc < 0)
            snprintf(err, errlen, "%s: %s", o->name, why);
        return rc;
    }
    }
    snprintf(err, errlen, "%s: bad option type", o->name);
    return ERR_INVAL;
}

static const struct args_opt *find_flag(const struct args_spec *s, const char *name, size_t len)
{
    for (size_t i = 0; i < s->n_opts; i++)
        if (!is_positional(&s->opts[i]) && strlen(s->opts[i].name) == len &&
            strncmp(s->opts[i].name, name, len) == 0)
            return &s->opts[i];
    return NULL;
}

/* the next positional slot: a STR not yet filled, or a repeatable FN */
static const struct args_opt *next_positional(const struct args_spec *s, bool *filled)
{
    for (size_t i = 0; i < s->n_opts; i++) {
        if (!is_positional(&s->opts[i]) || filled[i])
            continue;
        if (s->opts[i].type != ARGS_TYPE_FN)
            filled[i] = true;
        return &s->opts[i];
    }
    return NULL;
}

static int fail_line(const struct args_spec *s, const char *msg)
{
    fprintf(stderr, "%s: %s (see %s --help)\n", s->prog, msg, s->prog);
    return ERR_INVAL;
}

int args_parse(const struct args_spec *s, int argc, char **argv)
{
    char err[ARGS_ERR_MAX];
    bool filled[64] = {false};
    bool flags_done = false;
    if (s->n_opts > 64)
        return fail_line(s, "too many options in the table");
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0)
            break;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            args_usage(s, stdout);
            return ARGS_HELP;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_done && strcmp(a, "--") == 0) {
            flags_done = true;
            continue;
        }
        if (flags_done || a[0] != '-' || a[1] == '\0') {
            const struct args_opt *o = next_positional(s, filled);
            if (!o) {
                snprintf(err, sizeof err, "unexpected argument \"%s\"", a);
                return fail_line(s, err);
            }
            if (o->type == ARGS_TYPE_FN || o->type == ARGS_TYPE_STR) {
                if (set_value(o, a, err, sizeof err) < 0)
                    return fail_line(s, err);
                continue;
            }
            return fail_line(s, "a positional argument must be STR or FN");
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const struct args_opt *o = find_flag(s, a, len);
        if (!o) {
            snprintf(err, sizeof err, "unknown flag %.*s", (int)len, a);
            return fail_line(s, err);
        }
        const char *v;
        if (eq)
            v = eq + 1;
        else if (o->type == ARGS_TYPE_BOOL)
            v = "true";
        else if (i + 1 < argc)
            v = argv[++i];
        else {
            snprintf(err, sizeof err, "%s needs a value%s%s", o->name, o->meta ? " " : "",
                     o->meta ? o->meta : "");
            return fail_line(s, err);
        }
        if (set_value(o, v, err, sizeof err) < 0)
            return fail_line(s, err);
    }
    return 0;
}

int args_exit(int rc)
{
    return rc == ARGS_HELP ? 0 : 2;
}

int args_fail(const struct args_spec *s, const char *fmt, ...)
{
    char msg[ARGS_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    (void)fail_line(s, msg);
    return 2;
}

void args_usage(const struct args_spec *s, FILE *f)
{
    fprintf(f, "usage: %s %s\n", s->prog, s->synopsis);
    for (size_t i = 0; i < s->n_opts; i++) {
        const struct args_opt *o = &s->opts[i];
        char left[64];
        if (o->meta && !is_positional(o))
            snprintf(left, sizeof left, "%s %s", o->name, o->meta);
        else
            snprintf(left, sizeof left, "%s", o->name);
        if (strlen(left) > 24) /* the help on the next line */
            fprintf(f, "  %s\n  %-24s %s\n", left, "", o->help ? o->help : "");
        else
            fprintf(f, "  %-24s %s\n", left, o->help ? o->help : "");
    }
    fprintf(f, "  %-24s %s\n", "-h, --help", "this help");
    if (s->notes)
        fputs(s->notes, f);
}
