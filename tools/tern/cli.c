/* cli: value parsers shared by `tern` commands (see cli.h). */
#include "cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"

int cli_load_format_parse(void *dst, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "dummy") != 0 && strcmp(v, "auto") != 0) {
        snprintf(err, errlen, "\"%s\" is not auto|dummy", v);
        return ERR_INVAL;
    }
    *(bool *)dst = strcmp(v, "dummy") == 0;
    return 0;
}

int cli_kv_elem_parse(void *dst, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "bf16") == 0 || strcmp(v, "auto") == 0)
        *(int *)dst = 2;
    else if (strcmp(v, "fp8") == 0)
        *(int *)dst = 1;
    else {
        snprintf(err, errlen, "\"%s\" is not auto|bf16|fp8", v);
        return ERR_INVAL;
    }
    return 0;
}
