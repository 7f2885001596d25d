/* chaos_load: N streaming clients in one poll loop. Each client sends
 *   POST /v1/completions {"prompt":[p],"max_tokens":M,"ignore_eos":true,"temperature":0,
 *                         "stream":true,"stream_options":{"include_usage":true}}
 * on a fresh connection, de-chunks the body, splits SSE events, appends every choices[0].text,
 * and at [DONE] checks: one finish_reason, usage.completion_tokens == M, and the whole text ==
 * the expected text for p (so a lost or repeated token shows). An error event, a non-200 answer
 * or a connection closed before [DONE] counts as "errored" (a well-formed end under faults). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "chaos.h"
#include "itest.h"

#define STALL_MS 15000 /* no byte for this long = hung */

enum cstate { C_IDLE, C_HEAD, C_BODY };

struct client {
    enum cstate st;
    int fd;
    int prompt;          /* index into prompts */
    long long start_ms, last_rx_ms, next_ms;
    long long kill_ms;   /* > 0: in flight with tokens at a kill at this time */
    long long late_ms;   /* it must end within this long of kill_ms (2 s; load_mark_restart's) */
    char *rx;            /* raw bytes not yet consumed */
    size_t rx_len, rx_cap;
    char *body;          /* de-chunked bytes not yet split into events */
    size_t body_len, body_cap;
    bool chunked;
    int status;
    char *text;          /* accumulated completion text */
    size_t text_len, text_cap;
    int n_tokens_events; /* events carrying text */
    int n_finish, n_usage_tokens;
    bool error_event, done;
};

struct load {
    int port, n, max_tokens, n_prompts;
    uint32_t *prompts;
    char **expected;
    struct client *c;
    bool paused;
    struct load_stats st;
};

static void grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return;
    *cap = need * 2 + 256;
    *p = realloc(*p, *cap);
}

static void put(char **p, size_t *len, size_t *cap, const char *s, size_t n)
{
    grow(p, cap, *len + n + 1);
    memcpy(*p + *len, s, n);
    *len += n;
    (*p)[*len] = '\0';
}

struct load *load_create(int port, int n_clients, int max_tokens, const uint32_t *prompts,
                         char *const *expected, int n_prompts)
{
    struct load *l = calloc(1, sizeof(*l));
    l->port = port;
    l->n = n_clients;
    l->max_tokens = max_tokens;
    l->n_prompts = n_prompts;
    l->prompts = calloc((size_t)n_prompts, sizeof(uint32_t));
    l->expected = calloc((size_t)n_prompts, sizeof(char *));
    for (int i = 0; i < n_prompts; i++) {
        l->prompts[i] = prompts[i];
        l->expected[i] = strdup(expected[i]);
    }
    l->c = calloc((size_t)n_clients, sizeof(struct client));
    for (int i = 0; i < n_clients; i++) {
        l->c[i].fd = -1;
        l->c[i].prompt = i % n_prompts;
        l->c[i].next_ms = itest_now_ms() + i * 7; /* spread the starts */
    }
    return l;
}

void load_destroy(struct load *l)
{
    for (int i = 0; i < l->n; i++) {
        if (l->c[i].fd >= 0)
            close(l->c[i].fd);
        free(l->c[i].rx);
        free(l->c[i].body);
        free(l->c[i].text);
    }
    for (int i = 0; i < l->n_prompts; i++)
        free(l->expected[i]);
    free(l->expected);
    free(l->prompts);
    free(l->c);
    free(l);
}

void load_set_port(struct load *l, int port)
{
    l->port = port;
}

void load_pause(struct load *l, bool paused)
{
    l->paused = paused;
}

int load_inflight(const struct load *l)
{
    int n = 0;
    for (int i = 0; i < l->n; i++)
        n += l->c[i].st != C_IDLE;
    return n;
}

void load_mark_kill(struct load *l)
{
    long long now = itest_now_ms();
    for (int i = 0; i < l->n; i++) {
        struct client *c = &l->c[i];
        if (c->st != C_IDLE && c->n_tokens_events > 0 && c->kill_ms == 0) {
            c->kill_ms = now;
            c->late_ms = 2000;
            l->st.marked++;
        }
    }
}

void load_mark_restart(struct load *l, long long within_ms)
{
    long long now = itest_now_ms();
    for (int i = 0; i < l->n; i++)
        if (l->c[i].st != C_IDLE && l->c[i].kill_ms > 0) {
            l->c[i].kill_ms = now;
            l->c[i].late_ms = within_ms;
        }
}

int load_marked_open(const struct load *l)
{
    int n = 0;
    for (int i = 0; i < l->n; i++)
        n += l->c[i].st != C_IDLE && l->c[i].kill_ms > 0;
    return n;
}

void load_stats_get(const struct load *l, struct load_stats *st)
{
    *st = l->st;
}

static void finish(struct load *l, struct client *c, const char *how)
{
    long long now = itest_now_ms();
    if (c->kill_ms > 0) {
        long long d = now - c->kill_ms;
        if (d > l->st.max_end_after_kill_ms)
            l->st.max_end_after_kill_ms = d;
        if (d > c->late_ms) {
            l->st.marked_late++;
            fprintf(stderr, "late end: %lld ms after the kill (%s)\n", d, how);
        }
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->st = C_IDLE;
    c->kill_ms = 0;
    c->next_ms = now + (strcmp(how, "completed") == 0 ? 0 : 50); /* back off after a failure */
    c->prompt = (c->prompt + 1) % l->n_prompts;
}

int load_body(char *buf, size_t cap, uint32_t prompt, int max_tokens, bool stream, int64_t seed)
{
    char extra[64] = "";
    if (seed >= 0)
        snprintf(extra, sizeof(extra), ",\"seed\":%lld", (long long)seed);
    /* greedy: at the default temperature 1 the fake engine's spike of 30 leaves the other
     * 151935 ids (V-1) e^-30 ~ 1.4e-8 of the mass, so one token in ~7e7 is a random id */
    return snprintf(buf, cap,
                    "{\"prompt\":[%u],\"max_tokens\":%d,\"ignore_eos\":true,\"temperature\":0%s%s}",
                    prompt, max_tokens, extra,
                    stream ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}" : "");
}

static void start(struct load *l, struct client *c)
{
    c->rx_len = c->body_len = c->text_len = 0;
    c->chunked = false;
    c->status = 0;
    c->n_tokens_events = c->n_finish = 0;
    c->n_usage_tokens = -1;
    c->error_event = c->done = false;
    c->kill_ms = 0;
    int fd = itest_connect(l->port);
    if (fd < 0) {
        l->st.refused++;
        c->next_ms = itest_now_ms() + 50;
        return;
    }
    char body[256], req[512];
    int bn = load_body(body, sizeof(body), l->prompts[c->prompt], l->max_tokens, true, -1);
    int rn = snprintf(req, sizeof(req),
                      "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: "
                      "application/json\r\nContent-Length: %d\r\n\r\n%s",
                      bn, body);
    l->st.started++;
    c->fd = fd;
    c->st = C_HEAD;
    c->start_ms = c->last_rx_ms = itest_now_ms();
    if (!itest_send(fd, req, (size_t)rn)) {
        l->st.errored++;
        finish(l, c, "send failed");
        return;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* one SSE event's data */
static void on_event(struct client *c, const char *data)
{
    if (strcmp(data, "[DONE]") == 0) {
        c->done = true;
        return;
    }
    cJSON *j = cJSON_Parse(data);
    if (!j) {
        c->error_event = true;
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "error"))
        c->error_event = true;
    cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (u && cJSON_IsObject(u)) {
        cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
        if (cJSON_IsNumber(ct))
            c->n_usage_tokens = (int)ct->valuedouble;
    }
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    if (c0) {
        cJSON *t = cJSON_GetObjectItemCaseSensitive(c0, "text");
        if (t && cJSON_IsString(t) && t->valuestring[0]) {
            put(&c->text, &c->text_len, &c->text_cap, t->valuestring, strlen(t->valuestring));
            c->n_tokens_events++;
        }
        cJSON *fr = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
        if (fr && cJSON_IsString(fr))
            c->n_finish++;
    }
    cJSON_Delete(j);
}

/* split complete events out of c->body */
static void split_events(struct client *c)
{
    size_t off = 0;
    for (;;) {
        char *end = c->body_len > off ? strstr(c->body + off, "\n\n") : NULL;
        if (!end)
            break;
        *end = '\0';
        for (char *line = c->body + off; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            if (strncmp(line, "data: ", 6) == 0)
                on_event(c, line + 6);
            line = nl ? nl + 1 : NULL;
        }
        off = (size_t)(end - c->body) + 2;
    }
    memmove(c->body, c->body + off, c->body_len - off);
    c->body_len -= off;
    if (c->body)
        c->body[c->body_len] = '\0';
}

/* consume c->rx: head, then (chunked) body */
static void parse(struct client *c)
{
    if (c->st == C_HEAD) {
        char *e = c->rx_len ? strstr(c->rx, "\r\n\r\n") : NULL;
        if (!e)
            return;
        *e = '\0';
        if (sscanf(c->rx, "HTTP/1.%*d %d", &c->status) != 1)
            c->status = -1;
        c->chunked = strcasestr(c->rx, "transfer-encoding: chunked") != NULL;
        size_t hl = (size_t)(e - c->rx) + 4;
        memmove(c->rx, c->rx + hl, c->rx_len - hl);
        c->rx_len -= hl;
        c->rx[c->rx_len] = '\0';
        c->st = C_BODY;
    }
    if (!c->chunked) {
        put(&c->body, &c->body_len, &c->body_cap, c->rx, c->rx_len);
        c->rx_len = 0;
    } else {
        size_t off = 0;
        for (;;) {
            char *le = off < c->rx_len ? strstr(c->rx + off, "\r\n") : NULL;
            if (!le)
                break;
            size_t sz = strtoul(c->rx + off, NULL, 16);
            size_t ll = (size_t)(le - (c->rx + off)) + 2;
            if (c->rx_len - off < ll + sz + 2)
                break;
            put(&c->body, &c->body_len, &c->body_cap, c->rx + off + ll, sz);
            off += ll + sz + 2;
            if (sz == 0)
                break;
        }
        memmove(c->rx, c->rx + off, c->rx_len - off);
        c->rx_len -= off;
        c->rx[c->rx_len] = '\0';
    }
    if (c->status == 200)
        split_events(c);
}

static void check_done(struct load *l, struct client *c)
{
    const char *want = l->expected[c->prompt];
    bool ok = c->n_finish == 1 && c->n_usage_tokens == l->max_tokens && c->text_len &&
              strcmp(c->text, want) == 0;
    if (ok) {
        l->st.completed++;
    } else {
        l->st.wrong_text++;
        fprintf(stderr,
                "WRONG stream: prompt=%u finish=%d usage=%d (want %d)\n  got  \"%.300s\"\n  want "
                "\"%.300s\"\n",
                l->prompts[c->prompt], c->n_finish, c->n_usage_tokens, l->max_tokens,
                c->text ? c->text : "", want);
    }
    finish(l, c, "completed");
}

static void on_readable(struct load *l, struct client *c)
{
    char buf[16384];
    for (;;) {
        ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
        if (r > 0) {
            c->last_rx_ms = itest_now_ms();
            put(&c->rx, &c->rx_len, &c->rx_cap, buf, (size_t)r);
            parse(c);
            if (c->st == C_BODY && c->status != 200 && c->status != 0) {
                l->st.errored++; /* 503 while a component is down: a well-formed end */
                l->st.err_status++;
                if (getenv("CHAOS_DEBUG"))
                    fprintf(stderr, "status %d %.200s\n", c->status, c->rx ? c->rx : "");
                finish(l, c, "non-200");
                return;
            }
            if (c->error_event) {
                l->st.errored++;
                l->st.err_event++;
                finish(l, c, "error event");
                return;
            }
            if (c->done) {
                check_done(l, c);
                return;
            }
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        l->st.errored++; /* closed or reset before [DONE] */
        l->st.err_closed++;
        finish(l, c, "closed");
        return;
    }
}

void load_run(struct load *l, int ms)
{
    long long end = itest_now_ms() + ms;
    struct pollfd *pf = calloc((size_t)l->n, sizeof(*pf));
    int *idx = calloc((size_t)l->n, sizeof(int));
    while (itest_now_ms() < end) {
        long long now = itest_now_ms();
        int k = 0;
        for (int i = 0; i < l->n; i++) {
            struct client *c = &l->c[i];
            if (c->st == C_IDLE && !l->paused && now >= c->next_ms)
                start(l, c);
            if (c->st != C_IDLE && now - c->last_rx_ms > STALL_MS) {
                l->st.hung++;
                fprintf(stderr, "HUNG stream: prompt=%u no byte for %d ms\n",
                        l->prompts[c->prompt], STALL_MS);
                finish(l, c, "hung");
            }
            if (c->st != C_IDLE) {
                pf[k] = (struct pollfd){c->fd, POLLIN, 0};
                idx[k++] = i;
            }
        }
        int left = (int)(end - itest_now_ms());
        int wait = left < 10 ? (left > 0 ? left : 0) : 10;
        if (k == 0) {
            itest_sleep_ms(wait);
            continue;
        }
        if (poll(pf, (nfds_t)k, wait) <= 0)
            continue;
        for (int j = 0; j < k; j++)
            if (pf[j].revents)
                on_readable(l, &l->c[idx[j]]);
    }
    free(pf);
    free(idx);
}
