/* svc_harness: process spawning and a proto-level test gateway (see svc_harness.h). */
#include "svc_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"

// ---- processes ----

static bool keep_tmp(void)
{
    const char *v = getenv("TERN_KEEP_TMP");
    return v && *v && strcmp(v, "0") != 0;
}

/* Removes dir once this process has exited, however it ends (main returns after a failed CHECK,
 * an abort, ctest's SIGKILL at the timeout): a detached grandchild, not our child (tests check
 * that every child was reaped), blocks on a pipe whose only writer is this process and runs
 * rm -rf at EOF. Failing to set it up leaves the dir behind; that is no reason to fail a test. */
static void remove_at_exit(const char *dir)
{
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        if (fork() != 0)
            _exit(0);
        (void)setsid(); /* out of the test's process group: a kill of the group spares it */
        /* no stdio (ctest reads the test's pipes to EOF) and no other descriptor */
        int null = open("/dev/null", O_RDWR);
        for (int i = 0; i < 3; i++)
            (void)dup2(null, i);
        for (int i = 3; i < 1024; i++)
            if (i != fd[0])
                (void)close(i);
        char c;
        ssize_t r;
        do
            r = read(fd[0], &c, 1);
        while (r > 0 || (r < 0 && errno == EINTR));
        execl("/bin/rm", "rm", "-rf", "--", dir, (char *)NULL);
        _exit(127);
    }
    (void)close(fd[0]);
    if (pid < 0) {
        (void)close(fd[1]);
        return;
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    /* fd[1] stays open (close-on-exec: the services never hold it) until this process ends */
}

int svc_tmpdir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/tern-it-XXXXXX");
    if (!mkdtemp(buf))
        return -errno;
    if (keep_tmp())
        fprintf(stderr, "svc_tmpdir: keeping %s (TERN_KEEP_TMP)\n", buf);
    else
        remove_at_exit(buf);
    return 0;
}

int svc_spawn(struct svc_proc *p, const char *dir, const char *name, const char *bin,
              const char *const *args)
{
    return svc_spawn_env(p, dir, name, bin, args, NULL);
}

bool svc_start_one(struct svc_proc *sched, struct svc_proc *wk, const char *dir,
                   const char *const *sa, const char *const *wa, struct svc_client *c,
                   const char *gw_ep, int timeout_ms)
{
    bool ok = svc_spawn(sched, dir, "scheduler", "tern-scheduler", sa) == 0;
    ok &= svc_spawn(wk, dir, "worker", "tern-worker", wa) == 0;
    ok &= svc_client_open(c, gw_ep) == 0;
    ok &= svc_client_hello(c, 3000) == 0;
    return ok && svc_client_wait_workers(c, 1, timeout_ms);
}

/* In the child: "K=V" sets K, a bare "K" unsets it. */
static void apply_env(const char *const *env)
{
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq) {
            unsetenv(env[i]);
            continue;
        }
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - env[i]), env[i]);
        setenv(key, eq + 1, 1);
    }
}

int svc_spawn_env(struct svc_proc *p, const char *dir, const char *name, const char *bin,
                  const char *const *args, const char *const *env)
{
    const char *bdir = getenv("TERN_BUILD_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/bin/%s", bdir ? bdir : "build", bin);
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->log, sizeof p->log, "%s/%s.log", dir, name);
    const char *argv[64];
    int n = 0;
    argv[n++] = path;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        apply_env(env);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    p->pid = pid;
    return 0;
}

bool svc_alive(struct svc_proc *p)
{
    if (!p->pid)
        return false;
    int st;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid) {
        p->pid = 0;
        return false;
    }
    return true;
}

int svc_stop(struct svc_proc *p, int sig, int timeout_ms)
{
    if (!p->pid)
        return -1;
    kill(p->pid, sig);
    uint64_t end = clock_now_ms() + (uint64_t)timeout_ms;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid)
            break;
        if (clock_now_ms() >= end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            p->pid = 0;
            return -1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    p->pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void svc_dump_log(const struct svc_proc *p)
{
    FILE *f = fopen(p->log, "r");
    if (!f)
        return;
    static char lines[40][512];
    int n = 0;
    while (fgets(lines[n % 40], sizeof lines[0], f))
        n++;
    fclose(f);
    fprintf(stderr, "---- last lines of %s ----\n", p->log);
    for (int i = n > 40 ? n - 40 : 0; i < n; i++)
        fputs(lines[i % 40], stderr);
}

int svc_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

// ---- client ----

static void env_init(Tern__Envelope *env, uint64_t req_id)
{
    tern__envelope__init(env);
    env->protocol_version = MSG_PROTOCOL_VERSION;
    env->req_id = req_id;
}

int svc_client_open(struct svc_client *c, const char *endpoint)
{
    memset(c, 0, sizeof *c);
    c->zctx = msg_context_create();
    if (!c->zctx)
        return -errno;
    return msg_sock_connect(&c->sock, c->zctx, MSG_KIND_DEALER, endpoint,
                            &tern__envelope__descriptor, NULL);
}

void svc_client_close(struct svc_client *c)
{
    if (c->status)
        msg_free(&c->status->base);
    c->status = NULL;
    msg_sock_close(&c->sock);
    msg_context_destroy(c->zctx);
    c->zctx = NULL;
}

struct svc_req *svc_client_req(struct svc_client *c, uint64_t id)
{
    for (int i = 0; i < SVC_MAX_REQS; i++)
        if (c->reqs[i].used && c->reqs[i].id == id)
            return &c->reqs[i];
    return NULL;
}

static void heartbeat(struct svc_client *c)
{
    uint64_t now = clock_now_ms();
    if (now - c->hb_at_ms < 50)
        return;
    Tern__Envelope env;
    Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
    env_init(&env, 0);
    hb.has_role = true;
    hb.role = TERN__ROLE__ROLE_GATEWAY;
    env.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    (void)msg_send(&c->sock, NULL, &env.base); /* a lost heartbeat is retried in 50 ms */
    c->hb_at_ms = now;
}

static void on_msg(struct svc_client *c, Tern__Envelope *env, bool *keep)
{
    struct svc_req *r = svc_client_req(c, env->req_id);
    switch (env->body_case) {
    case TERN__ENVELOPE__BODY_HELLO_ACK:
        c->sched_instance = env->hello_ack->scheduler_instance;
        break;
    case TERN__ENVELOPE__BODY_HEARTBEAT:
        if (env->heartbeat->instance != c->sched_instance) {
            if (c->sched_instance)
                c->n_instance_changes++;
            c->sched_instance = env->heartbeat->instance;
        }
        break;
    case TERN__ENVELOPE__BODY_STATUS:
        if (c->status)
            msg_free(&c->status->base);
        c->status = env->status;
        env->status = NULL; /* detached: the caller keeps it in c->status */
        *keep = true;
        break;
    case TERN__ENVELOPE__BODY_TOKEN_EVENT:
        if (!r)
            break;
        if (env->token_event->index != r->n_tokens)
            r->gap = true;
        if (r->n_events == 0)
            r->prompt_tokens = env->token_event->prompt_tokens;
        r->n_events++;
        for (size_t i = 0; i < env->token_event->n_token_ids && r->n_tokens < SVC_MAX_TOKENS; i++)
            r->tokens[r->n_tokens++] = env->token_event->token_ids[i];
        for (size_t i = 0; i < env->token_event->n_logprobs; i++) {
            const Tern__TokenLogprob *lp = env->token_event->logprobs[i];
            if (r->n_logprobs == 0) {
                r->first_logprob = lp->logprob;
                for (size_t k = 0; k < lp->n_top_ids && k < 8 && k < lp->n_top_logprobs; k++) {
                    r->first_top_ids[k] = lp->top_ids[k];
                    r->first_top_lps[k] = lp->top_logprobs[k];
                    r->n_first_top++;
                }
            }
            r->n_logprobs++;
        }
        break;
    case TERN__ENVELOPE__BODY_FINISH:
        if (!r)
            break;
        r->done = true;
        r->finish_reason = env->finish->reason;
        r->stop_token = env->finish->has_stop_token_id ? (int)env->finish->stop_token_id : -1;
        r->usage_completion = env->finish->usage ? env->finish->usage->completion_tokens : 0;
        break;
    case TERN__ENVELOPE__BODY_ERROR:
        if (env->req_id == 0) {
            c->n_link_errors++;
            c->last_link_error = env->error->code;
        }
        if (!r)
            break;
        r->done = true;
        r->error_code = env->error->code;
        break;
    default:
        break;
    }
}

void svc_client_pump(struct svc_client *c, int ms)
{
    uint64_t end = clock_now_ms() + (uint64_t)ms;
    do {
        heartbeat(c);
        uint64_t now = clock_now_ms();
        int wait = now >= end ? 0 : (int)(end - now);
        if (msg_sock_wait(&c->sock, wait > 20 ? 20 : wait) <= 0)
            continue;
        ProtobufCMessage *m;
        while (msg_recv(&c->sock, NULL, &m) == 0) {
            Tern__Envelope *env = (Tern__Envelope *)m;
            bool keep = false;
            on_msg(c, env, &keep);
            if (keep) {
                /* the status snapshot was detached from the envelope: free only the envelope
                 * shell, clearing the oneof so free_unpacked does not touch it */
                env->body_case = TERN__ENVELOPE__BODY__NOT_SET;
            }
            msg_free(m);
        }
    } while (clock_now_ms() < end);
}

int svc_client_hello(struct svc_client *c, int timeout_ms)
{
    Tern__Envelope env;
    Tern__GatewayHello h = TERN__GATEWAY_HELLO__INIT;
    env_init(&env, 0);
    h.name = "test-gw";
    env.body_case = TERN__ENVELOPE__BODY_GATEWAY_HELLO;
    env.gateway_hello = &h;
    c->sched_instance = 0;
    if (msg_send(&c->sock, NULL, &env.base) < 0)
        return ERR_CLOSED;
    uint64_t end = clock_now_ms() + (uint64_t)timeout_ms;
    while (!c->sched_instance && clock_now_ms() < end)
        svc_client_pump(c, 20);
    return c->sched_instance ? 0 : ERR_TIMEOUT;
}

int svc_client_submit(struct svc_client *c, uint64_t id, const struct svc_submit *s)
{
    struct svc_req *r = NULL;
    for (int i = 0; i < SVC_MAX_REQS && !r; i++)
        if (!c->reqs[i].used)
            r = &c->reqs[i];
    if (!r)
        return ERR_FULL;
    memset(r, 0, sizeof *r);
    r->used = true;
    r->id = id;
    r->stop_token = -1;
    Tern__Envelope env;
    Tern__Submit sub = TERN__SUBMIT__INIT;
    Tern__SamplingParams sp = TERN__SAMPLING_PARAMS__INIT;
    env_init(&env, id);
    sub.n_prompt_ids = s->n_prompt;
    sub.prompt_ids = (uint32_t *)s->prompt;
    if (s->max_tokens) {
        sub.has_max_tokens = true;
        sub.max_tokens = s->max_tokens;
    }
    sub.n_stop_ids = s->n_stop;
    sub.stop_ids = (uint32_t *)s->stop_ids;
    if (s->temperature >= 0) {
        sp.has_temperature = true;
        sp.temperature = s->temperature;
    }
    sp.has_seed = s->has_seed;
    sp.seed = s->seed;
    sp.has_logprobs = s->logprobs;
    sp.logprobs = s->logprobs;
    sp.has_top_logprobs = s->top_logprobs > 0;
    sp.top_logprobs = s->top_logprobs;
    sp.n_bias_ids = sp.n_bias_values = s->n_bias;
    sp.bias_ids = (uint32_t *)s->bias_ids;
    sp.bias_values = (float *)s->bias_vals;
    sp.has_min_tokens = s->min_tokens > 0;
    sp.min_tokens = s->min_tokens;
    sp.json_schema = (char *)s->json_schema;
    sp.has_json_replay = s->json_replay > 0;
    sp.json_replay = s->json_replay;
    sub.sampling = &sp;
    sub.has_ignore_eos = s->ignore_eos;
    sub.ignore_eos = s->ignore_eos;
    env.body_case = TERN__ENVELOPE__BODY_SUBMIT;
    env.submit = &sub;
    return msg_send(&c->sock, NULL, &env.base);
}

int svc_client_abort(struct svc_client *c, uint64_t id)
{
    Tern__Envelope env;
    Tern__Abort a = TERN__ABORT__INIT;
    env_init(&env, id);
    a.reason = "test";
    env.body_case = TERN__ENVELOPE__BODY_ABORT;
    env.abort = &a;
    return msg_send(&c->sock, NULL, &env.base);
}

bool svc_client_wait_done(struct svc_client *c, const uint64_t *ids, int n, int timeout_ms)
{
    uint64_t end = clock_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        bool all = true;
        for (int i = 0; i < n; i++) {
            struct svc_req *r = svc_client_req(c, ids[i]);
            all &= r && r->done;
        }
        if (all)
            return true;
        if (clock_now_ms() >= end)
            return false;
        svc_client_pump(c, 20);
    }
}

bool svc_client_wait_tokens(struct svc_client *c, uint64_t id, uint32_t n, int timeout_ms)
{
    uint64_t end = clock_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        struct svc_req *r = svc_client_req(c, id);
        if (r && (r->n_tokens >= n || r->done))
            return r->n_tokens >= n;
        if (clock_now_ms() >= end)
            return false;
        svc_client_pump(c, 10);
    }
}

int svc_client_status(struct svc_client *c, int timeout_ms)
{
    static uint64_t cookie = 1000;
    Tern__Envelope env;
    Tern__StatusRequest q = TERN__STATUS_REQUEST__INIT;
    env_init(&env, 0);
    q.has_cookie = true;
    q.cookie = ++cookie;
    env.body_case = TERN__ENVELOPE__BODY_STATUS_REQUEST;
    env.status_request = &q;
    if (msg_send(&c->sock, NULL, &env.base) < 0)
        return ERR_CLOSED;
    uint64_t end = clock_now_ms() + (uint64_t)timeout_ms;
    while (clock_now_ms() < end) {
        svc_client_pump(c, 10);
        if (c->status && c->status->cookie == cookie)
            return 0;
    }
    return ERR_TIMEOUT;
}

bool svc_client_wait_workers(struct svc_client *c, uint32_t n, int timeout_ms)
{
    uint64_t end = clock_now_ms() + (uint64_t)timeout_ms;
    while (clock_now_ms() < end) {
        if (svc_client_status(c, 500) == 0 && c->status->workers_ready == n)
            return true;
        svc_client_pump(c, 50);
    }
    return false;
}

uint32_t svc_fake_next(uint32_t prev, uint32_t vocab)
{
    return (uint32_t)(((uint64_t)prev * 31 + 7) % vocab);
}
