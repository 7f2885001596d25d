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
    fprintf(f, "usage: tern <command> [args]\n\ncommands:\n");
    for (const struct cmd *c = cmds; c->name; c++) {
        char dashed[64];
        snprintf(dashed, sizeof(dashed), "%s", c->name);
        for (char *p = dashed; *p; p++)
            if (*p == '_')
                *p = '-';
        fprintf(f, "  %-18s %s\n", dashed, c->help);
    }
}

int main(int argc, char **argv)
{
    log_init("tern", LOG_LEVEL_WARN);
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (const struct cmd *c = cmds; c->name; c++)
        if (names_match(argv[1], c->name))
            return c->fn(argc - 1, argv + 1);
    fprintf(stderr, "tern: unknown command '%s' (see tern --help)\n", argv[1]);
    return 2;
}
