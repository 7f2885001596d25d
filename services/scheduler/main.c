/* tern-scheduler: admission, queue, batching and KV accounting between gateways and workers. */
#include <signal.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "sched_core.h"
#include "sched_check.h"

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
    struct sched_cfg cfg;
    struct sched s;
    if (sched_check_wanted(argc, argv)) /* print the KV-pool plan, start nothing */
        return sched_check_main(argc, argv);
    int rc = sched_cfg_parse(&cfg, argc, argv); /* defaults, file, env, flags; --check-config */
    if (rc < 0)
        return 2;
    if (rc > 0)
        return 0;
    log_init("scheduler", (enum log_level)log_level_parse(cfg.log_level));
    sched_cfg_log(&cfg);
    if (sched_check_startup(&cfg) < 0) /* one max_model_len sequence must fit */
        return 1;
    signals_install();
    rc = sched_init(&s, &cfg); /* both ROUTER sockets, tables */
    if (rc < 0) {
        LOG_ERR("init_failed", "err=%s", err_str(rc));
        return 1;
    }
    (void)sdnotify_ready();      /* no-op outside systemd */
    rc = sched_run(&s, &g_stop); /* returns after the SIGTERM drain */
    sched_deinit(&s);
    LOG_INFO("exit", "rc=%d", rc);
    return rc < 0 ? 1 : 0;
}
