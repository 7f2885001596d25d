/* svc_harness: what the services integration tests share: spawning the real binaries with
 * their stderr in a temp dir, and a minimal gateway speaking tern.proto directly (hello,
 * heartbeats, submit, abort, status) that collects each request's events. */
#ifndef SVC_HARNESS_H
#define SVC_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/msg.h"
#include "proto/tern.pb-c.h"

#define SVC_MAX_REQS 64
#define SVC_MAX_TOKENS 4096

struct svc_proc {
    pid_t pid; // 0 = not running
    char name[32];
    char log[512]; // stderr file
};

/* Temp dir for sockets and logs (mkdtemp /tmp/tern-it-XXXXXX). It is removed with everything in
 * it once this process has exited, also after a failure or a kill, unless TERN_KEEP_TMP is set
 * (not "0"): then its path is printed and it stays. */
int svc_tmpdir(char *buf, size_t n);
/* Start bin (a file in $TERN_BUILD_DIR/bin) with args (NULL-terminated), stderr to
 * <dir>/<name>.log. Returns 0 or -errno. */
int svc_spawn(struct svc_proc *p, const char *dir, const char *name, const char *bin,
              const char *const *args);
/* svc_spawn with the child's environment edited first: each "K=V" of env (NULL-terminated, may
 * be NULL) is set and each bare "K" is unset. */
int svc_spawn_env(struct svc_proc *p, const char *dir, const char *name, const char *bin,
                  const char *const *args, const char *const *env);
/* Send sig; with wait, reap it (SIGKILL after timeout_ms). Returns the exit status or -1. */
int svc_stop(struct svc_proc *p, int sig, int timeout_ms);
bool svc_alive(struct svc_proc *p);
/* Print the last lines of a process log to stderr (on failure). */
void svc_dump_log(const struct svc_proc *p);
/* A free TCP port on 127.0.0.1 (bind port 0, read it back, close). */
int svc_free_port(void);

struct svc_req {
    uint64_t id;
    bool used;
    uint32_t tokens[SVC_MAX_TOKENS];
    uint32_t n_tokens;
    uint32_t n_events;
    uint32_t prompt_tokens; // from the first TokenEvent
    bool gap;               // a TokenEvent index did not follow the previous tokens
    bool done;              // Finish or Error received
    int finish_reason;      // Tern__FinishReason, 0 if error
    int error_code;         // Tern__ErrorCode, 0 if finished
    int stop_token;         // -1 if none
    uint32_t usage_completion;
    uint32_t n_logprobs;
    float first_logprob;
    uint32_t n_first_top; // alternatives of the first token
    uint32_t first_top_ids[8];
    float first_top_lps[8];
};

struct svc_client {
    void *zctx;
    struct msg_sock sock;        // DEALER to the scheduler's gateway endpoint
    uint64_t sched_instance;     // from HelloAck / Heartbeat; 0 = none yet
    uint32_t n_instance_changes; // times a heartbeat showed a new instance
    uint32_t n_link_errors;      // Error messages with req_id 0
    int last_link_error;         // the code of the last one
    uint64_t hb_at_ms;           // last heartbeat sent
    struct svc_req reqs[SVC_MAX_REQS];
    Tern__StatusSnapshot *status; // last one received (owned), NULL if none
};

int svc_client_open(struct svc_client *c, const char *endpoint);
void svc_client_close(struct svc_client *c);
/* Receive for up to ms, keeping heartbeats going. */
void svc_client_pump(struct svc_client *c, int ms);
/* Hello, then wait (up to timeout_ms) for HelloAck. 0 or ERR_TIMEOUT. */
int svc_client_hello(struct svc_client *c, int timeout_ms);

struct svc_submit {
    const uint32_t *prompt;
    uint32_t n_prompt;
    uint32_t max_tokens;
    float temperature; // < 0: leave the default
    bool has_seed;
    uint64_t seed;
    const uint32_t *stop_ids;
    uint32_t n_stop;
    bool logprobs;
    uint32_t top_logprobs;
    bool ignore_eos;
    const uint32_t *bias_ids; // (n_bias) logit_bias
    const float *bias_vals;
    uint32_t n_bias;
    uint32_t min_tokens;
    const char *json_schema; // response_format as a JSON Schema; NULL: off
    uint32_t json_replay;    // completion tokens at the end of prompt (resubmission)
};

/* Send a Submit; the request is tracked in c->reqs. 0 or a msg_send status. */
int svc_client_submit(struct svc_client *c, uint64_t id, const struct svc_submit *s);
int svc_client_abort(struct svc_client *c, uint64_t id);
struct svc_req *svc_client_req(struct svc_client *c, uint64_t id);
/* Pump until every listed request is done or timeout_ms. true when all done. */
bool svc_client_wait_done(struct svc_client *c, const uint64_t *ids, int n, int timeout_ms);
/* Pump until request id has at least n tokens (or is done), or timeout. */
bool svc_client_wait_tokens(struct svc_client *c, uint64_t id, uint32_t n, int timeout_ms);
/* Ask for a snapshot and wait for it (c->status). 0 or ERR_TIMEOUT. */
int svc_client_status(struct svc_client *c, int timeout_ms);
/* Poll status until workers_ready == n (or timeout). true on success. */
bool svc_client_wait_workers(struct svc_client *c, uint32_t n, int timeout_ms);
/* The usual start: tern-scheduler (sa) as "scheduler" and one tern-worker (wa) as "worker" in
 * dir, then c opened as a gateway on gw_ep, hello, and the worker ready within timeout_ms.
 * true when all that happened (c is open either way: svc_client_close it). */
bool svc_start_one(struct svc_proc *sched, struct svc_proc *wk, const char *dir,
                   const char *const *sa, const char *const *wa, struct svc_client *c,
                   const char *gw_ep, int timeout_ms);

/* The fake engine's model: the token after prev. */
uint32_t svc_fake_next(uint32_t prev, uint32_t vocab);

#endif
