/* tern-gateway: the HTTP front. Parse config, init, signal ready, run until SIGTERM drain. */
#include "common/err.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "gw.h"

int main(int argc, char **argv)
{
    struct gw_cfg cfg;
    struct gw gw;
    int rc = gw_cfg_parse(&cfg, argc, argv); /* defaults, env, flags; --check-config exits here */
    if (rc < 0)
        return 2;
    if (rc > 0) {
        gw_cfg_deinit(&cfg);
        return 0;
    }
    log_init("gateway", (enum log_level)cfg.log_level);
    gw_cfg_log(&cfg);
    rc = gw_init(&gw, &cfg); /* tokenizer, loop, scheduler link, listener, signals */
    if (rc < 0) {
        LOG_ERR("init_failed", "err=%s", err_str(rc));
        gw_cfg_deinit(&cfg);
        return 1;
    }
    sdnotify_ready();
    rc = gw_run(&gw); /* returns after the SIGTERM drain */
    gw_deinit(&gw);
    gw_cfg_deinit(&cfg);
    LOG_INFO("exit", "rc=%d", rc);
    return rc < 0 ? 1 : 0;
}
