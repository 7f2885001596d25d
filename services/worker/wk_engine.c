/* wk_engine: picks the backend named by the config. */
#include "wk_engine.h"

#include <string.h>

#include "common/err.h"
#include "wk_cfg.h"

int wk_engine_create(const struct wk_cfg *cfg, wk_engine_progress_cb progress, void *ctx,
                     struct wk_engine **out)
{
    *out = NULL;
    if (strcmp(cfg->engine, "fake") == 0)
        return wk_engine_fake_create(cfg, out);
    if (strcmp(cfg->engine, "cpu") == 0)
        return wk_engine_cpu_create(cfg, progress, ctx, out);
    if (strcmp(cfg->engine, "cuda") == 0)
        return wk_engine_cuda_create(cfg, progress, ctx, out);
    return ERR_INVAL;
}

void wk_engine_destroy(struct wk_engine *e)
{
    if (e)
        e->ops->destroy(e);
}
