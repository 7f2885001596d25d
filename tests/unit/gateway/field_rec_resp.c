/* gw_responses.c compiled with every key lookup noted (field_rec.h), for test_api_fields. */
#include <cjson/cJSON.h>

#include "field_rec.h"

#define cJSON_GetObjectItemCaseSensitive field_rec_get
#include "gw_responses.c"
