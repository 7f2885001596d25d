/* tern version (also tern --version): prints the version. */
#include <stdio.h>

#include "common/args.h"

int tern_cmd_version(int argc, char **argv);
const char tern_cmd_version_help[] = "print the version (also tern --version)";

int tern_cmd_version(int argc, char **argv)
{
    const struct args_spec spec = {"tern version", "", NULL, 0, NULL};
    int rc = args_parse(&spec, argc, argv);
    if (rc != 0)
        return args_exit(rc);
    printf("tern %s\n", TERN_VERSION);
    return 0;
}
