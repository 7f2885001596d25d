/* tern sched-status: ask a running scheduler for its StatusSnapshot over the gateway link and
 * print it as key=value lines (one for the scheduler, one per worker). Exit 0, or 1 when the
 * scheduler does not answer in time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "common/err.h"
#include "common/msg.h"
#include "proto/tern.pb-c.h"

int tern_cmd_sched_status(int argc, char **argv);
const char tern_cmd_sched_status_help[] = "print a running scheduler's status snapshot";

static const char *state_name(Tern__WorkerState s)
{
    switch (s) {
    case TERN__WORKER_STATE__WORKER_STATE_LOADING:
        return "loading";
    case TERN__WORKER_STATE__WORKER_STATE_READY:
        return "ready";
    case TERN__WORKER_STATE__WORKER_STATE_DEAD:
        return "dead";
    default:
        return "unknown";
    }
}

static void print_status(const Tern__StatusSnapshot *st)
{
    printf("scheduler instance=%016llx uptime_ms=%llu draining=%d gateways=%u workers_ready=%u "
           "workers_total=%u running=%u waiting=%u kv_blocks_used=%u kv_blocks_total=%u "
           "kv_usage=%.4f state_slots_used=%u submitted=%llu finished=%llu aborted=%llu "
           "failed=%llu rejected=%llu prompt_tokens=%llu generation_tokens=%llu "
           "max_model_len=%u model=%s\n",
           (unsigned long long)st->scheduler_instance, (unsigned long long)st->uptime_ms,
           (int)st->draining, st->gateways, st->workers_ready, st->workers_total, st->running,
           st->waiting, st->kv_blocks_used, st->kv_blocks_total, (double)st->kv_usage,
           st->state_slots_used, (unsigned long long)st->requests_submitted,
           (unsigned long long)st->requests_finished, (unsigned long long)st->requests_aborted,
           (unsigned long long)st->requests_failed, (unsigned long long)st->requests_rejected,
           (unsigned long long)st->prompt_tokens_total,
           (unsigned long long)st->generation_tokens_total, st->max_model_len,
           st->model_id && st->model_id[0] ? st->model_id : "-");
    for (size_t i = 0; i < st->n_workers; i++) {
        const Tern__WorkerStatus *w = st->workers[i];
        printf("worker id=%s state=%s model=%s running=%u kv_blocks_used=%u kv_blocks_total=%u "
               "slots_used=%u slots_total=%u load=%.2f tokens_generated=%llu\n",
               w->worker_id ? w->worker_id : "-", state_name(w->state),
               w->model_id && w->model_id[0] ? w->model_id : "-", w->running, w->kv_blocks_used,
               w->kv_blocks_total, w->state_slots_used, w->state_slots_total,
               (double)w->load_fraction, (unsigned long long)w->tokens_generated);
    }
}

int tern_cmd_sched_status(int argc, char **argv)
{
    char ep[MSG_ENDPOINT_MAX] = "";
    int timeout_ms = 2000;
    const char *arg_ep = getenv("TERN_SCHED_GATEWAY_ENDPOINT");
    const struct args_opt opts[] = {
        ARGS_STR("--endpoint", "EP", &arg_ep,
                 "scheduler's gateway endpoint (TERN_SCHED_GATEWAY_ENDPOINT, default "
                 "ipc://<runtime dir>/scheduler-gw.sock)"),
        ARGS_INT("--timeout-ms", "N", &timeout_ms, 1, 3600000,
                 "wait this long for the answer, ms (2000)"),
    };
    const struct args_spec spec = {"tern sched-status", "[--endpoint EP] [--timeout-ms N]", opts,
                                   ARRAY_LEN(opts), NULL};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (arg_ep && arg_ep[0])
        snprintf(ep, sizeof ep, "%s", arg_ep);
    if (!ep[0] && msg_endpoint_default(ep, sizeof ep, "scheduler-gw") < 0) {
        fprintf(stderr, "tern sched-status: no runtime dir for the default endpoint\n");
        return 1;
    }
    if (!msg_endpoint_is_valid(ep))
        return args_fail(&spec, "--endpoint: \"%s\" is not ipc://PATH or tcp://HOST:PORT", ep);
    void *z = msg_context_create();
    if (!z)
        return 1;
    struct msg_sock s;
    int rc = msg_sock_connect(&s, z, MSG_KIND_DEALER, ep, &tern__envelope__descriptor, NULL);
    if (rc < 0) {
        fprintf(stderr, "tern sched-status: %s: %s\n", ep, err_str(rc));
        msg_context_destroy(z);
        return 1;
    }
    Tern__Envelope env_out = TERN__ENVELOPE__INIT;
    Tern__StatusRequest q = TERN__STATUS_REQUEST__INIT;
    env_out.protocol_version = MSG_PROTOCOL_VERSION;
    q.has_cookie = 1;
    q.cookie = clock_now_ns();
    env_out.body_case = TERN__ENVELOPE__BODY_STATUS_REQUEST;
    env_out.status_request = &q;
    rc = msg_send(&s, NULL, &env_out.base);
    int result = 1;
    uint64_t end = clock_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
    while (rc == 0 && result == 1 && clock_now_ms() < end) {
        if (msg_sock_wait(&s, 50) <= 0)
            continue;
        ProtobufCMessage *m;
        while (msg_recv(&s, NULL, &m) == 0) {
            Tern__Envelope *e = (Tern__Envelope *)m;
            if (e->body_case == TERN__ENVELOPE__BODY_STATUS && e->status->cookie == q.cookie) {
                print_status(e->status);
                result = 0;
            }
            msg_free(m);
        }
    }
    if (result != 0)
        fprintf(stderr, "tern sched-status: no answer from %s within %d ms\n", ep, timeout_ms);
    msg_sock_close(&s);
    msg_context_destroy(z);
    return result;
}
