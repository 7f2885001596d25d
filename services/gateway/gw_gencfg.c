/* gw_gencfg: generation_config.json -> struct gw_req_defaults (see gw_gencfg.h). Startup only:
 * the file is read before the loop runs. */
#include "gw_gencfg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/file.h"
#include "common/log.h"

#define GENCFG_FILE "generation_config.json"

/* number key in [lo, hi]: 1 found, 0 absent (or null), ERR_INVAL otherwise */
static int num_key(const cJSON *root, const char *name, double lo, double hi, double *out,
                   char *err, size_t errlen)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!it || cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < lo ||
        it->valuedouble > hi) {
        snprintf(err, errlen, "%s: '%s' must be a number in [%g, %g]", GENCFG_FILE, name, lo, hi);
        return ERR_INVAL;
    }
    *out = it->valuedouble;
    return 1;
}

int gw_gencfg_parse(struct gw_req_defaults *d, const char *json, size_t len, char *err,
                    size_t errlen)
{
    memset(d, 0, sizeof(*d));
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(err, errlen, "%s is not a JSON object", GENCFG_FILE);
        return ERR_INVAL;
    }
    double v = 0;
    int rc;
    /* the ranges a request may set (gw_req.c); top_k -1 or 0 = off; max_new_tokens >= 1 */
    if ((rc = num_key(root, "temperature", 0, 2, &d->temperature, err, errlen)) < 0)
        goto out;
    d->has_temperature = rc;
    if ((rc = num_key(root, "top_p", 1e-9, 1, &d->top_p, err, errlen)) < 0)
        goto out;
    d->has_top_p = rc;
    if ((rc = num_key(root, "top_k", -1, 1 << 20, &v, err, errlen)) < 0)
        goto out;
    d->has_top_k = rc;
    d->top_k = v > 0 ? (int64_t)v : 0;
    if ((rc = num_key(root, "min_p", 0, 1, &d->min_p, err, errlen)) < 0)
        goto out;
    d->has_min_p = rc;
    if ((rc = num_key(root, "repetition_penalty", 1e-9, 2, &d->repetition_penalty, err, errlen)) <
        0)
        goto out;
    d->has_repetition_penalty = rc;
    if ((rc = num_key(root, "max_new_tokens", 1, INT32_MAX, &v, err, errlen)) < 0)
        goto out;
    d->has_max_tokens = rc;
    d->max_tokens = (int64_t)v;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc < 0 ? rc : 0;
}

int gw_gencfg_load(struct gw_req_defaults *d, const char *mode, const char *tokenizer_dir,
                   bool *found, char *source, size_t srclen, char *err, size_t errlen)
{
    memset(d, 0, sizeof(*d));
    *found = false;
    if (strcmp(mode, "vllm") == 0) {
        snprintf(source, srclen, "off");
        return 0;
    }
    bool autodetect = strcmp(mode, "auto") == 0;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", autodetect ? tokenizer_dir : mode, GENCFG_FILE);
    size_t len = 0;
    char *text = file_read(path, &len);
    if (!text) {
        int e = errno;
        if (autodetect && e == ENOENT) {
            snprintf(source, srclen, "none");
            return 0;
        }
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
        return -e;
    }
    int rc = gw_gencfg_parse(d, text, len, err, errlen);
    free(text);
    if (rc < 0)
        return rc;
    *found = true;
    snprintf(source, srclen, "%s", path);
    return 0;
}

void gw_gencfg_log(const struct gw_req_defaults *d, const char *source)
{
    char line[512];
    size_t n = 0;
    line[0] = '\0';
#define GENCFG_ADD(cond, ...)                                                                      \
    do {                                                                                           \
        if ((cond) && n < sizeof(line))                                                            \
            n += (size_t)snprintf(line + n, sizeof(line) - n, __VA_ARGS__);                        \
    } while (0)
    GENCFG_ADD(d->has_temperature, " temperature=%g", d->temperature);
    GENCFG_ADD(d->has_top_p, " top_p=%g", d->top_p);
    GENCFG_ADD(d->has_top_k, " top_k=%lld", (long long)d->top_k);
    GENCFG_ADD(d->has_min_p, " min_p=%g", d->min_p);
    GENCFG_ADD(d->has_repetition_penalty, " repetition_penalty=%g", d->repetition_penalty);
    GENCFG_ADD(d->has_max_tokens, " max_new_tokens=%lld", (long long)d->max_tokens);
#undef GENCFG_ADD
    LOG_INFO("generation_config", "source=\"%s\"%s", source, line);
}
