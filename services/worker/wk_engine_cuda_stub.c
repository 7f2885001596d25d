/* wk_engine_cuda_stub: the "cuda" engine in a build without CUDA (or before
 * wk_engine_cuda.c exists): refuses with ERR_UNSUPPORTED. */
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "common/log.h"
#include "wk_engine.h"

bool wk_engine_cuda_is_built(void)
{
    return false;
}

int wk_engine_cuda_create(const struct wk_cfg *cfg, wk_engine_progress_cb progress, void *ctx,
                          struct wk_engine **out)
{
    (void)cfg;
    (void)progress;
    (void)ctx;
    *out = NULL;
    LOG_ERR("engine_unsupported", "engine=cuda msg=\"this build has no CUDA engine\"");
    return ERR_UNSUPPORTED;
}
