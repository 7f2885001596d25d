/* args: table-driven flags for the command-line tools (`tern <command>`), one convention for all
 * of them and for the services (which parse with cfg and share the number parsing here):
 *   --help / -h   the usage, generated from the table, on stdout; exit 0
 *   usage error   one line on stderr naming the flag or value; exit 2
 *   runtime error one line on stderr; exit 1 (the command's business)
 * Numbers are parsed whole (no trailing text) and checked against their range. */
#ifndef COMMON_ARGS_H
#define COMMON_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum args_type {
    ARGS_TYPE_BOOL,   /* bool: the flag alone sets true */
    ARGS_TYPE_STR,    /* const char *: points into argv */
    ARGS_TYPE_INT,    /* int within [min, max] */
    ARGS_TYPE_I64,    /* int64_t within [min, max] */
    ARGS_TYPE_U64,    /* uint64_t, any value (seeds) */
    ARGS_TYPE_DOUBLE, /* double within [min, max], finite */
    ARGS_TYPE_FLOAT,  /* float within [min, max], finite */
    ARGS_TYPE_FN,     /* fn(dst, value, err, errlen) for each occurrence (repeatable) */
};

/* Parse one value into dst; 0, or ERR_INVAL with a message (without the flag name) in err. */
typedef int (*args_value_fn)(void *dst, const char *value, char *err, size_t errlen);

/* One flag ("--name") or one positional argument (a name without the leading '-', shown as
 * the placeholder, e.g. "DIR"). A positional of type STR is taken once; of type FN, any number
 * of times. */
struct args_opt {
    const char *name;
    const char *meta;  /* placeholder of the value in the help ("N"); NULL for BOOL */
    enum args_type type;
    void *dst;
    double min, max;   /* numbers: inclusive bounds */
    args_value_fn fn;  /* ARGS_TYPE_FN */
    const char *help;  /* one line: the meaning, the unit and the default */
};

#define ARGS_BOOL(name, dst, help) {name, NULL, ARGS_TYPE_BOOL, dst, 0, 0, NULL, help}
#define ARGS_STR(name, meta, dst, help) {name, meta, ARGS_TYPE_STR, dst, 0, 0, NULL, help}
#define ARGS_INT(name, meta, dst, lo, hi, help) {name, meta, ARGS_TYPE_INT, dst, lo, hi, NULL, help}
#define ARGS_I64(name, meta, dst, lo, hi, help) {name, meta, ARGS_TYPE_I64, dst, lo, hi, NULL, help}
#define ARGS_U64(name, meta, dst, help) {name, meta, ARGS_TYPE_U64, dst, 0, 0, NULL, help}
#define ARGS_DOUBLE(name, meta, dst, lo, hi, help) \
    {name, meta, ARGS_TYPE_DOUBLE, dst, lo, hi, NULL, help}
#define ARGS_FLOAT(name, meta, dst, lo, hi, help) \
    {name, meta, ARGS_TYPE_FLOAT, dst, lo, hi, NULL, help}
#define ARGS_FN(name, meta, dst, fn, help) {name, meta, ARGS_TYPE_FN, dst, 0, 0, fn, help}

struct args_spec {
    const char *prog;     /* "tern generate": starts every message */
    const char *synopsis; /* the usage line after the program name */
    const struct args_opt *opts;
    size_t n_opts;
    const char *notes;    /* text printed after the flags (ends with a newline), or NULL */
};

#define ARGS_HELP 1 /* args_parse printed the help */

/* Fill the destinations from argv[1..] ("--name value", "--name=value", positionals; "--" ends
 * the flags). Returns 0, ARGS_HELP after printing the usage on stdout, or ERR_INVAL after one
 * line on stderr. A command returns args_exit(rc) unless rc == 0. */
int args_parse(const struct args_spec *s, int argc, char **argv);
/* The exit code for a non-zero result of args_parse or args_fail: 0 for ARGS_HELP, else 2. */
int args_exit(int rc);
/* One usage-error line "PROG: <message> (see PROG --help)" on stderr; returns 2 (the exit). */
int args_fail(const struct args_spec *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The usage: synopsis, one line per option, the notes. */
void args_usage(const struct args_spec *s, FILE *f);

/* Whole-string numbers, also used by cfg. name starts the message ("NAME: not an integer: ..."). */
int args_parse_i64(const char *name, const char *s, int64_t min, int64_t max, int64_t *out,
                   char *err, size_t errlen);
int args_parse_double(const char *name, const char *s, double min, double max, double *out,
                      char *err, size_t errlen);
/* Parse s as a boolean (1/0 true/false yes/no on/off). */
int args_parse_bool(const char *s, bool *out);

#endif
