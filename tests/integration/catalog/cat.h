/* cat: the bad-input catalog (docs/RELIABILITY.md "Bad-input catalog"). One case = raw bytes
 * sent to a gateway on a fresh connection, the statuses that are right for it, and checks on
 * the OpenAI-shaped error body. Cases come from cases.tsv (hand-written) and from generators
 * (cat_gen.c: every request parameter x {wrong type, below range, above range, null}, limits,
 * UTF-8, nesting); cat_proto.c sends malformed protobuf frames straight to the scheduler. */
#ifndef CAT_H
#define CAT_H

#include <stdbool.h>
#include <stddef.h>

#define CAT_STATUS_MAX 4

enum cat_target {
    CAT_MAIN = 0, /* gateway without API keys */
    CAT_AUTH,     /* gateway started with --api-key k1 --api-key k2 */
};

struct cat_case {
    char name[96];
    enum cat_target target;
    bool slow;                     /* trickle the bytes one by one (slowloris) */
    char *req;                     /* raw request bytes (owned) */
    size_t req_len;
    int status[CAT_STATUS_MAX];    /* accepted statuses; 0 = closed without a response */
    int n_status;
    char expect[512];              /* comma-separated checks, see cat_check() */
};

struct cat_list {
    struct cat_case *v;
    int n, cap;
};

/* Append a case; req is copied. expect may be NULL. statuses "400|405". */
void cat_add(struct cat_list *l, const char *name, enum cat_target t, const char *req,
             size_t req_len, const char *statuses, const char *expect);
/* A POST of body (Content-Length set) to path; extra header lines may be NULL. */
void cat_add_post(struct cat_list *l, const char *name, enum cat_target t, const char *path,
                  const char *extra_headers, const char *body, size_t body_len,
                  const char *statuses, const char *expect);
void cat_list_free(struct cat_list *l);

/* Load cases.tsv (see the header comment there). Returns the number loaded or -1. */
int cat_load_tsv(struct cat_list *l, const char *path);
/* Generated cases; mml = the worker's max_model_len, body_max = the gateway's body limit. */
void cat_gen_params(struct cat_list *l);
void cat_gen_limits(struct cat_list *l, int mml, int body_max);

/* Malformed frames to the scheduler's gateway and worker endpoints. Returns the number of
 * cases run; failures counted into *failed (and printed). sched_pid is checked after each. */
int cat_proto_run(const char *gw_endpoint, const char *wk_endpoint, int sched_pid, int *failed);

#endif
