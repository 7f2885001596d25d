/* cfg: table-driven service configuration (DESIGN.md "Configuration"). A service describes its
 * config struct with a table of cfg_opt; cfg_parse fills it from, in increasing precedence, the
 * defaults already in the struct, an optional key=value file, TERN_* environment variables and
 * --flags. Validation beyond types and ranges stays with the service (one function there). */
#ifndef COMMON_CFG_H
#define COMMON_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cfg_type {
    CFG_TYPE_STR = 0, /* char[size] */
    CFG_TYPE_INT,     /* int, within [min, max] */
    CFG_TYPE_I64,     /* int64_t, within [min, max] */
    CFG_TYPE_DOUBLE,  /* double (no range check) */
    CFG_TYPE_BOOL,    /* bool: flag alone = true; values 1/0 true/false yes/no on/off */
};

struct cfg_opt {
    const char *name; /* flag without "--" and key in the file, e.g. "heartbeat-ms" */
    const char *env;  /* environment variable, e.g. "TERN_HEARTBEAT_MS"; NULL = none */
    enum cfg_type type;
    size_t offset;    /* offsetof(struct x_cfg, field) */
    size_t size;      /* CFG_TYPE_STR: buffer size in bytes */
    int64_t min, max; /* INT / I64 bounds (inclusive); min == max == 0: no bounds */
    const char *help; /* one line, includes the unit and the default */
};

/* What cfg_parse saw besides options. */
struct cfg_result {
    bool check_config; /* --check-config: validate, log, exit 0/2 */
    bool help;         /* --help / -h */
    int n_rest;        /* arguments after "--", or unknown positional ones (in rest) */
    char **rest;       /* points into argv; NULL when n_rest == 0 */
};

/* Fill cfg (already holding the defaults) from the file named by --config FILE or by the env
 * variable config_env (may be NULL), then the env variables, then argv[1..]. Flags take
 * "--name value" or "--name=value". Returns 0 or ERR_INVAL with a message in err. */
int cfg_parse(void *cfg, const struct cfg_opt *opts, size_t n_opts, int argc, char **argv,
              const char *config_env, struct cfg_result *res, char *err, size_t errlen);
/* Set one option from text (used by cfg_parse; handy in tests). Returns 0 or ERR_INVAL. */
int cfg_set(void *cfg, const struct cfg_opt *opt, const char *value, char *err, size_t errlen);
/* Write "name=value name=value ..." (strings quoted when they contain spaces) into buf. */
void cfg_format(const void *cfg, const struct cfg_opt *opts, size_t n_opts, char *buf, size_t len);
/* Print a usage block: one line per option with its env variable and help. */
void cfg_usage(FILE *f, const char *prog, const struct cfg_opt *opts, size_t n_opts);

#endif
