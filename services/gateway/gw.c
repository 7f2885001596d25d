/* gw: service init/run/deinit, the listener, and the SIGTERM drain: stop accepting, 503 to
 * new requests, close idle connections, wait for in-flight exchanges up to drain_ms, then
 * close everything and return from gw_run. */
#include "gw.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "gw_conn.h"
#include "gw_gencfg.h"
#include "gw_metrics.h"
#include "gw_sched.h"
#include "gw_text.h"

static void on_connection(uv_stream_t *server, int status)
{
    struct gw *gw = server->data;
    if (status < 0) {
        LOG_WARN("accept_error", "err=%s", uv_strerror(status));
        return;
    }
    gw_conn_accept(gw);
}

static void stop_loop_handles(struct gw *gw)
{
    gw_sched_stop(gw->sched);
    if (!uv_is_closing((uv_handle_t *)&gw->drain_timer))
        uv_close((uv_handle_t *)&gw->drain_timer, NULL);
    if (!uv_is_closing((uv_handle_t *)&gw->watchdog_timer))
        uv_close((uv_handle_t *)&gw->watchdog_timer, NULL);
    if (!uv_is_closing((uv_handle_t *)&gw->sig_term))
        uv_close((uv_handle_t *)&gw->sig_term, NULL);
    if (!uv_is_closing((uv_handle_t *)&gw->sig_int))
        uv_close((uv_handle_t *)&gw->sig_int, NULL);
}

void gw_check_drained(struct gw *gw)
{
    if (!gw->draining)
        return;
    if (gw->n_inflight == 0) {
        gw_conn_close_all(gw, true);
        if (gw->n_conns == 0)
            stop_loop_handles(gw);
    }
}

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    sdnotify_watchdog();
}

static void on_drain_deadline(uv_timer_t *t)
{
    struct gw *gw = t->data;
    LOG_WARN("drain_deadline", "inflight=%d conns=%d", gw->n_inflight, gw->n_conns);
    gw_conn_close_all(gw, false); /* open streams end; their requests are aborted */
    if (gw->n_conns == 0)
        stop_loop_handles(gw);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct gw *gw = s->data;
    if (gw->draining)
        return;
    gw->draining = true;
    LOG_INFO("draining", "signal=%d inflight=%d deadline_ms=%d", signum, gw->n_inflight,
             gw->cfg->drain_ms);
    sdnotify_stopping();
    if (gw->listener_open) {
        uv_close((uv_handle_t *)&gw->listener, NULL);
        gw->listener_open = false;
    }
    gw_conn_close_idle(gw);
    uv_timer_start(&gw->drain_timer, on_drain_deadline, (uint64_t)gw->cfg->drain_ms, 0);
    gw_check_drained(gw);
}

int gw_init(struct gw *gw, const struct gw_cfg *cfg)
{
    memset(gw, 0, sizeof(*gw));
    gw->cfg = cfg;
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error return, not a signal */
    char err[512] = "";
    gw->text = gw_text_create(cfg->tokenizer_dir, err, sizeof(err));
    if (!gw->text) {
        LOG_ERR("tokenizer_load_failed", "dir=%s msg=\"%s\"", cfg->tokenizer_dir, err);
        return ERR_INVAL;
    }
    if (gw_text_set_default_kwargs(gw->text, cfg->default_template_kwargs) < 0) {
        LOG_ERR("bad_default_template_kwargs", "msg=\"not a JSON object\"");
        gw_text_destroy(gw->text);
        gw->text = NULL;
        return ERR_INVAL;
    }
    gw_text_set_exclude_tools_when_none(gw->text, cfg->exclude_tools_none);
    bool found = false;
    char source[1100];
    int rc = gw_gencfg_load(&gw->gen_defaults_file, cfg->generation_config, cfg->tokenizer_dir,
                            &found, source, sizeof(source), err, sizeof(err));
    if (rc < 0) {
        LOG_ERR("generation_config_failed", "err=%s msg=\"%s\"", err_str(rc), err);
        gw_text_destroy(gw->text);
        gw->text = NULL;
        return rc;
    }
    gw->gen_defaults = found ? &gw->gen_defaults_file : NULL;
    gw_gencfg_log(&gw->gen_defaults_file, source);
    gw->started_s = (int64_t)time(NULL);
    rc = uv_loop_init(&gw->loop);
    if (rc < 0)
        goto out_text;
    gw->metrics = gw_metrics_create(cfg->model_name);
    gw->sched = gw_sched_create(&gw->loop, cfg->sched_endpoint, cfg->sched_dead_ms,
                                cfg->sched_resume_ms, &cfg->curve);
    if (!gw->sched) {
        rc = ERR_INVAL;
        goto out_loop;
    }
    struct sockaddr_storage addr;
    rc = uv_ip4_addr(cfg->host, cfg->port, (struct sockaddr_in *)&addr);
    if (rc < 0)
        rc = uv_ip6_addr(cfg->host, cfg->port, (struct sockaddr_in6 *)&addr);
    if (rc < 0) {
        LOG_ERR("bad_listen_address", "host=%s", cfg->host);
        goto out_sched;
    }
    uv_tcp_init(&gw->loop, &gw->listener);
    gw->listener.data = gw;
    gw->listener_open = true;
    rc = uv_tcp_bind(&gw->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&gw->listener, 511, on_connection);
    if (rc < 0) {
        LOG_ERR("listen_failed", "host=%s port=%d err=%s", cfg->host, cfg->port, uv_strerror(rc));
        goto out_listener;
    }
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    uv_tcp_getsockname(&gw->listener, (struct sockaddr *)&bound, &blen);
    gw->port_bound = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                                 : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    uv_signal_init(&gw->loop, &gw->sig_term);
    uv_signal_init(&gw->loop, &gw->sig_int);
    gw->sig_term.data = gw;
    gw->sig_int.data = gw;
    uv_signal_start(&gw->sig_term, on_signal, SIGTERM);
    uv_signal_start(&gw->sig_int, on_signal, SIGINT);
    uv_timer_init(&gw->loop, &gw->drain_timer);
    gw->drain_timer.data = gw;
    uv_timer_init(&gw->loop, &gw->watchdog_timer);
    gw->watchdog_timer.data = gw;
    uint64_t wd_ms = sdnotify_watchdog_ms();
    if (wd_ms > 0)
        uv_timer_start(&gw->watchdog_timer, on_watchdog, wd_ms / 2, wd_ms / 2);
    LOG_INFO("listening", "host=%s port=%d scheduler=%s", cfg->host, gw->port_bound,
             cfg->sched_endpoint);
    return 0;

out_listener:
    uv_close((uv_handle_t *)&gw->listener, NULL);
    gw->listener_open = false;
out_sched:
    gw_sched_destroy(gw->sched);
    gw->sched = NULL;
out_loop:
    gw_metrics_destroy(gw->metrics);
    uv_run(&gw->loop, UV_RUN_NOWAIT);
    uv_loop_close(&gw->loop);
out_text:
    gw_text_destroy(gw->text);
    gw->text = NULL;
    return rc;
}

int gw_run(struct gw *gw)
{
    uv_run(&gw->loop, UV_RUN_DEFAULT);
    return 0;
}

void gw_deinit(struct gw *gw)
{
    if (gw->listener_open) {
        uv_close((uv_handle_t *)&gw->listener, NULL);
        gw->listener_open = false;
    }
    gw_conn_close_all(gw, false);
    stop_loop_handles(gw);
    uv_run(&gw->loop, UV_RUN_NOWAIT);
    gw_sched_destroy(gw->sched);
    gw->sched = NULL;
    uv_run(&gw->loop, UV_RUN_NOWAIT);
    if (uv_loop_close(&gw->loop) != 0)
        LOG_WARN("loop_not_empty", "msg=\"handles still open at exit\"");
    gw_metrics_destroy(gw->metrics);
    gw->metrics = NULL;
    gw_text_destroy(gw->text);
    gw->text = NULL;
}
