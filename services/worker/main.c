/* tern-worker: loads a model, registers with the scheduler, executes step plans. */
#include <signal.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "wk.h"
#include "wk_bench.h"

static volatile sig_atomic_t g_stop; /* the signal flag (STYLE.md §6) */

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
    struct wk_cfg cfg;
    struct wk w;
    int rc = wk_cfg_parse(&cfg, argc, argv); /* defaults, file, env, flags; --check-config */
    if (rc < 0)
        return 2;
    if (rc > 0)
        return 0;
    log_init("worker", (enum log_level)log_level_parse(cfg.log_level));
    wk_cfg_log(&cfg);
    if (cfg.bench) /* no scheduler: time the engine, print, exit */
        return wk_bench_run(&cfg) < 0 ? 1 : 0;
    signals_install();
    rc = wk_init(&w, &cfg); /* sockets, exec thread (loads the engine) */
    if (rc < 0) {
        LOG_ERR("init_failed", "err=%s", err_str(rc));
        return 1;
    }
    rc = wk_run(&w, &g_stop); /* until SIGTERM or a fatal engine error */
    (void)sdnotify_stopping(); /* no-op outside systemd */
    wk_deinit(&w);
    LOG_INFO("exit", "rc=%d", rc);
    return rc < 0 ? 1 : 0;
}
