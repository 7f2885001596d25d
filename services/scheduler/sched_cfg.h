/* sched_cfg: the scheduler's whole configuration, parsed from defaults < file < TERN_* env <
 * flags and validated in one place (sched_cfg_parse). */
#ifndef SCHED_CFG_H
#define SCHED_CFG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/msg.h"

struct sched_cfg {
    char gateway_endpoint[MSG_ENDPOINT_MAX]; // ROUTER for gateways; default ipc://<rundir>/scheduler-gw.sock
    char worker_endpoint[MSG_ENDPOINT_MAX];  // ROUTER for workers; default ipc://<rundir>/scheduler-wk.sock
    int heartbeat_ms;        // heartbeat interval on both links, ms; default 500
    int dead_after_ms;       // a peer silent this long is dead, ms; default 3000
    int queue_cap;           // waiting requests before QUEUE_FULL; default 256
    int queue_timeout_ms;    // a request waiting this long for a worker fails NO_WORKER, ms; default 60000
    int max_step_tokens;     // token budget of one step (prefill chunks + decodes); default 2048
    int decode_steps;        // decode steps granted per plan (pipelining), default 4
    int drain_timeout_ms;    // SIGTERM: finish in-flight requests for at most this long, ms; default 30000
    int max_msg_bytes;       // frame cap on both links, bytes; default 8 MiB
    int retry_after_ms;      // Retry-After hint in QUEUE_FULL / NO_WORKER / DRAINING, ms; default 1000
    bool check_pool;         // run sched_pool_check after every change (tests); default false
    char log_level[16];      // debug|info|warn|error; default info
};

/* Fill cfg from argv / env / file. Returns 0 to run, 1 when the program should exit 0 (--help,
 * --check-config passed: it logs the config first), or ERR_INVAL (message printed to stderr). */
int sched_cfg_parse(struct sched_cfg *cfg, int argc, char **argv);
/* Log the effective configuration in one line (ev=config). */
void sched_cfg_log(const struct sched_cfg *cfg);
/* Check values and relations; message in err. Returns 0 or ERR_INVAL. */
int sched_cfg_validate(const struct sched_cfg *cfg, char *err, size_t errlen);

#endif
