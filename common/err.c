/* err: status code to text. */
#include "common/err.h"

#include <string.h>

const char *err_str(int rc)
{
    switch (rc) {
    case 0:
        return "ok";
#define ERR_CASE(name, val, str) \
    case name:                   \
        return str;
        ERR_TABLE(ERR_CASE)
#undef ERR_CASE
    default:
        break;
    }
    if (rc < 0 && rc > -4096)
        return strerror(-rc);
    return "unknown error";
}
