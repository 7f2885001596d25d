/* tern version: prints the version. */
#include <stdio.h>

int tern_cmd_version(int argc, char **argv);
const char tern_cmd_version_help[] = "print the version";

int tern_cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("tern %s\n", TERN_VERSION);
    return 0;
}
