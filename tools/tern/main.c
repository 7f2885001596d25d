/* tern: the command-line tool. Dispatches `tern <command> ...` to tern_cmd_<command>(). */
#include "common/log.h"

#include <stdio.h>
#include <string.h>

#define TERN_CMD(n)                           \
    int tern_cmd_##n(int argc, char **argv);  \
    extern const char tern_cmd_##n##_help[];
#include "tern_cmds.inc"
#undef TERN_CMD

struct cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct cmd cmds[] = {
#define TERN_CMD(n) { #n, tern_cmd_##n, tern_cmd_##n##_help },
#include "tern_cmds.inc"
#undef TERN_CMD
    { NULL, NULL, NULL },
};

static int names_match(const char *arg, const char *name)
{
    for (; *arg && *name; arg++, name++) {
        char a = *arg == '-' ? '_' : *arg;
        if (a != *name)
            return 0;
    }
    return *arg == '\0' && *name == '\0';
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tern <command> [args]     (tern help <command>, tern <command> --help)\n"
               "       tern --version\n\ncommands:\n");
    for (const struct cmd *c = cmds; c->name; c++) {
        char dashed[64];
        snprintf(dashed, sizeof(dashed), "%s", c->name);
        for (char *p = dashed; *p; p++)
            if (*p == '_')
                *p = '-';
        fprintf(f, "  %-18s %s\n", dashed, c->help);
    }
}

static const struct cmd *find(const char *name)
{
    for (const struct cmd *c = cmds; c->name; c++)
        if (names_match(name, c->name))
            return c;
    return NULL;
}

int main(int argc, char **argv)
{
    log_init("tern", LOG_LEVEL_WARN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *a = argv[1];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 ||
        (strcmp(a, "help") == 0 && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0)
        a = "version";
    if (strcmp(a, "help") == 0) { /* tern help CMD = tern CMD --help */
        const struct cmd *c = find(argv[2]);
        if (!c || argc > 3) {
            fprintf(stderr, "tern: unknown command '%s' (see tern --help)\n", argv[2]);
            return 2;
        }
        char *av[] = {argv[2], (char *)"--help", NULL};
        return c->fn(2, av);
    }
    const struct cmd *c = find(a);
    if (c)
        return c->fn(argc - 1, argv + 1);
    fprintf(stderr, "tern: unknown %s '%s' (see tern --help)\n", a[0] == '-' ? "flag" : "command",
            a);
    return 2;
}
