/* chaos: what the kill and soak tests share: the stack (tern-scheduler + tern-worker --engine
 * fake + tern-gateway, ipc:// in a temp dir, gateway on a free loopback port), and a load driver
 * that keeps N streaming /v1/completions clients going in one poll loop and checks every
 * completed stream's whole text against the known output of the fake engine. */
#ifndef CHAOS_H
#define CHAOS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CHAOS_VOCAB 151936   /* fake engine vocabulary (the Qwen3 tokenizer's size) */
#define CHAOS_PLAIN_MAX 151643 /* ids below this are ordinary (not special) tokens */

struct chaos_stack {
    char dir[64];
    char gw_ep[256], wk_ep[256];
    int port;
    pid_t sched, worker, gw; /* 0 = not running */
    int step_us;             /* fake engine time per step */
    int max_seqs;
};

/* Start all three and wait for /health 200. 0 or -1. */
int chaos_stack_start(struct chaos_stack *s, int step_us, int max_seqs);
pid_t chaos_start_sched(struct chaos_stack *s);
pid_t chaos_start_worker(struct chaos_stack *s);
pid_t chaos_start_gateway(struct chaos_stack *s);
/* SIGKILL pid and reap it (*pid = 0). */
void chaos_kill9(pid_t *pid);
/* SIGTERM all (SIGKILL after 5 s) and reap them. */
void chaos_stack_stop(struct chaos_stack *s);
/* Remove the temp dir (after chaos_orphans). */
void chaos_stack_rmdir(struct chaos_stack *s);
/* Processes whose command line mentions the stack's temp dir (0 after a clean stop). */
int chaos_orphans(const struct chaos_stack *s);
/* Resident set size of pid, KiB (0 if gone). */
long chaos_rss_kb(pid_t pid);
/* Tail of a component's log to stderr. */
void chaos_dump_log(const struct chaos_stack *s, const char *name);

/* The fake engine's sequence: the token after prev. */
uint32_t chaos_fake_next(uint32_t prev);

struct load_stats {
    long started;         /* requests sent */
    long completed;       /* [DONE] after a finish_reason, text checked */
    long wrong_text;      /* completed but the text is not the expected one (lost/dup tokens) */
    long errored;         /* error event, non-200, or reset: ended without completing */
    long err_status, err_event, err_closed; /* errored, by kind */
    long refused;         /* connect refused (gateway down) */
    long hung;            /* no byte for the stall limit: closed by us */
    long marked;          /* streams in flight (with tokens) at a kill */
    long long max_end_after_kill_ms; /* the slowest of those to end */
    long marked_late;     /* of those, ended later than allowed (2 s after the kill; 5 s after
                             the restart for those a scheduler kill parked) */
};

/* A seed whose 22nd uniform (0.99999999998914) lies past the fake spike's whole mass, so a
 * request with it draws a wrong token there (max_tokens >= 22) unless it is greedy (load_body). */
#define CHAOS_TAIL_SEED 78026660

struct load;

/* The JSON body of the load's request for prompt [prompt] (greedy, ignore_eos; with stream,
 * stream_options.include_usage; with seed >= 0, that seed) into buf. snprintf's return. */
int load_body(char *buf, size_t cap, uint32_t prompt, int max_tokens, bool stream, int64_t seed);

/* n_clients streaming clients; each request is prompt [p] for one of the n_prompts p with
 * max_tokens tokens; expected[i] is the text for prompts[i] (copied). */
struct load *load_create(int port, int n_clients, int max_tokens, const uint32_t *prompts,
                         char *const *expected, int n_prompts);
void load_destroy(struct load *l);
void load_set_port(struct load *l, int port);
/* Run the clients for ms. */
void load_run(struct load *l, int ms);
/* Stop / resume starting new requests. */
void load_pause(struct load *l, bool paused);
/* Streams in flight now (requests sent and not ended). */
int load_inflight(const struct load *l);
/* A kill happened now: remember the streams in flight that have tokens. */
void load_mark_kill(struct load *l);
/* The streams marked at the last kill now count their time from now (the component is back)
 * and must end within within_ms: for a scheduler kill, which the gateway's open streams wait
 * out and then continue (their remaining tokens queue with the new load). */
void load_mark_restart(struct load *l, long long within_ms);
/* How many marked streams are still running. */
int load_marked_open(const struct load *l);
void load_stats_get(const struct load *l, struct load_stats *st);

#endif
