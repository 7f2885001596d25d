/* field_rec: see field_rec.h. */
#include "field_rec.h"

#include <stdio.h>

#include <cjson/cJSON.h>

#define FIELD_REC_MAX 4096

static struct {
    const cJSON *obj;
    char name[64];
} g_rec[FIELD_REC_MAX];
static int g_n;

cJSON *field_rec_get(const cJSON *obj, const char *name)
{
    if (g_n < FIELD_REC_MAX) {
        g_rec[g_n].obj = obj;
        snprintf(g_rec[g_n].name, sizeof(g_rec[g_n].name), "%s", name);
        g_n++;
    }
    return cJSON_GetObjectItemCaseSensitive(obj, name);
}

void field_rec_reset(void)
{
    g_n = 0;
}

const char *field_rec_name(const cJSON *obj, int i)
{
    for (int k = 0; k < g_n; k++)
        if (g_rec[k].obj == obj && i-- == 0)
            return g_rec[k].name;
    return NULL;
}
