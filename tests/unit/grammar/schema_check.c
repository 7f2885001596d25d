/* schema_check: see schema_check.h. */
#include "schema_check.h"

#include <math.h>
#include <string.h>

static bool type_is(const char *t, const cJSON *v)
{
    if (!strcmp(t, "object"))
        return cJSON_IsObject(v);
    if (!strcmp(t, "array"))
        return cJSON_IsArray(v);
    if (!strcmp(t, "string"))
        return cJSON_IsString(v);
    if (!strcmp(t, "number"))
        return cJSON_IsNumber(v);
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "boolean"))
        return cJSON_IsBool(v);
    if (!strcmp(t, "null"))
        return cJSON_IsNull(v);
    return false;
}

static bool check_object(const cJSON *s, const cJSON *v)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(s, "required"))
    {
        if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring))
            return false;
    }
    const cJSON *kv;
    cJSON_ArrayForEach(kv, v)
    {
        const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, kv->string) : NULL;
        if (ps && !schema_check(ps, kv))
            return false;
        if (!ps && addl && cJSON_IsFalse(addl))
            return false;
        if (!ps && addl && cJSON_IsObject(addl) && !schema_check(addl, kv))
            return false;
    }
    return true;
}

static bool check_array(const cJSON *s, const cJSON *v)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(s, "minItems");
    const cJSON *hi = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
    int n = cJSON_GetArraySize(v);
    if ((lo && n < lo->valueint) || (hi && n > hi->valueint))
        return false;
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (items && !schema_check(items, e))
            return false;
    }
    return true;
}

bool schema_check(const cJSON *s, const cJSON *v)
{
    if (cJSON_IsTrue(s))
        return true;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (x && !cJSON_Compare(x, v, true))
        return false;
    x = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (x) {
        bool hit = false;
        const cJSON *e;
        cJSON_ArrayForEach(e, x) hit |= cJSON_Compare(e, v, true);
        if (!hit)
            return false;
    }
    x = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (x) {
        bool hit = false;
        const cJSON *e;
        cJSON_ArrayForEach(e, x) hit |= schema_check(e, v);
        if (!hit)
            return false;
    }
    x = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(x) && !type_is(x->valuestring, v))
        return false;
    if (cJSON_IsArray(x)) {
        bool hit = false;
        const cJSON *e;
        cJSON_ArrayForEach(e, x) hit |= type_is(e->valuestring, v);
        if (!hit)
            return false;
    }
    if (cJSON_IsObject(v) && !check_object(s, v))
        return false;
    if (cJSON_IsArray(v) && !check_array(s, v))
        return false;
    return true;
}
