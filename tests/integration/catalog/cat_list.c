/* cat_list: the case list and the cases.tsv loader.
 *
 * cases.tsv: one case a line, five TAB-separated columns: kind, name, statuses, checks, payload.
 *   kind  R raw bytes to the main gateway, A raw bytes to the API-key gateway, S raw bytes
 *         trickled one at a time (slowloris), J a JSON body POSTed to /v1/chat/completions,
 *         C to /v1/completions, K to /v1/chat/completions on the API-key gateway (no key),
 *         P to /v1/responses.
 *   payload escapes: \r \n \t \\ \xHH, {REP:n:text} repeats text n times, {CL} becomes the
 *         byte length of everything after the first blank line (the body), {B} a small valid
 *         chat body. Lines starting with # and empty lines are skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"
#include "common/xalloc.h"

#define VALID_CHAT "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}"

void cat_add(struct cat_list *l, const char *name, enum cat_target t, const char *req,
             size_t req_len, const char *statuses, const char *expect)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->v = realloc(l->v, (size_t)l->cap * sizeof(*l->v));
    }
    struct cat_case *c = &l->v[l->n++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->target = t;
    c->req = xmalloc(req_len + 1);
    memcpy(c->req, req, req_len);
    c->req[req_len] = '\0';
    c->req_len = req_len;
    const char *p = statuses;
    while (*p && c->n_status < CAT_STATUS_MAX) {
        c->status[c->n_status++] = atoi(p);
        const char *bar = strchr(p, '|');
        if (!bar)
            break;
        p = bar + 1;
    }
    snprintf(c->expect, sizeof(c->expect), "%s", expect && strcmp(expect, "-") ? expect : "");
}

void cat_add_post(struct cat_list *l, const char *name, enum cat_target t, const char *path,
                  const char *extra_headers, const char *body, size_t body_len,
                  const char *statuses, const char *expect)
{
    size_t cap = body_len + 512 + strlen(path) + (extra_headers ? strlen(extra_headers) : 0);
    char *req = xmalloc(cap);
    int n = snprintf(req, cap,
                     "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n%s"
                     "Content-Length: %zu\r\n\r\n",
                     path, extra_headers ? extra_headers : "", body_len);
    memcpy(req + n, body, body_len);
    cat_add(l, name, t, req, (size_t)n + body_len, statuses, expect);
    free(req);
}

void cat_list_free(struct cat_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i].req);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

struct sbuf {
    char *p;
    size_t n, cap;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static int hexv(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* expand escapes and macros of s into b (recursive for {REP}) */
static int expand(struct sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\' && i + 1 < n) {
            char e = s[++i];
            if (e == 'r')
                sb_put(b, "\r", 1);
            else if (e == 'n')
                sb_put(b, "\n", 1);
            else if (e == 't')
                sb_put(b, "\t", 1);
            else if (e == '\\')
                sb_put(b, "\\", 1);
            else if (e == 'x' && i + 2 < n && hexv(s[i + 1]) >= 0 && hexv(s[i + 2]) >= 0) {
                char byte = (char)(hexv(s[i + 1]) * 16 + hexv(s[i + 2]));
                sb_put(b, &byte, 1);
                i += 2;
            } else {
                sb_put(b, "\\", 1);
                sb_put(b, &e, 1);
            }
        } else if (ch == '{' && strncmp(s + i, "{REP:", 5) == 0) {
            char *end;
            long cnt = strtol(s + i + 5, &end, 10);
            if (*end != ':')
                return -1;
            const char *text = end + 1;
            const char *close = memchr(text, '}', n - (size_t)(text - s));
            if (!close)
                return -1;
            for (long k = 0; k < cnt; k++)
                if (expand(b, text, (size_t)(close - text)) < 0)
                    return -1;
            i = (size_t)(close - s);
        } else if (ch == '{' && strncmp(s + i, "{B}", 3) == 0) {
            sb_put(b, VALID_CHAT, strlen(VALID_CHAT));
            i += 2;
        } else {
            sb_put(b, &ch, 1);
        }
    }
    return 0;
}

/* replace the {CL} marker (left by expand) with the body length */
static void fix_cl(struct sbuf *b)
{
    char *m = b->p ? strstr(b->p, "{CL}") : NULL;
    if (!m)
        return;
    char *blank = strstr(m, "\r\n\r\n");
    size_t body = blank ? b->n - (size_t)(blank + 4 - b->p) : 0;
    char num[24];
    int k = snprintf(num, sizeof(num), "%zu", body);
    size_t off = (size_t)(m - b->p);
    struct sbuf o = {0};
    sb_put(&o, b->p, off);
    sb_put(&o, num, (size_t)k);
    sb_put(&o, b->p + off + 4, b->n - off - 4);
    free(b->p);
    *b = o;
}

int cat_load_tsv(struct cat_list *l, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int n = 0, lineno = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        char *col[5];
        int k = 0;
        char *p = line;
        while (k < 4) {
            char *tab = strchr(p, '\t');
            if (!tab)
                break;
            *tab = '\0';
            col[k++] = p;
            p = tab + 1;
        }
        col[k++] = p;
        if (k != 5) {
            fprintf(stderr, "%s:%d: expected 5 columns\n", path, lineno);
            n = -1;
            break;
        }
        struct sbuf b = {0};
        if (expand(&b, col[4], strlen(col[4])) < 0) {
            fprintf(stderr, "%s:%d: bad macro\n", path, lineno);
            free(b.p);
            n = -1;
            break;
        }
        fix_cl(&b);
        char kind = col[0][0];
        if (kind == 'R' || kind == 'A' || kind == 'S') {
            cat_add(l, col[1], kind == 'A' ? CAT_AUTH : CAT_MAIN, b.p ? b.p : "", b.n, col[2],
                    col[3]);
            l->v[l->n - 1].slow = kind == 'S';
        } else if (kind == 'J' || kind == 'C' || kind == 'K' || kind == 'P') {
            cat_add_post(l, col[1], kind == 'K' ? CAT_AUTH : CAT_MAIN,
                         kind == 'C'   ? "/v1/completions"
                         : kind == 'P' ? "/v1/responses"
                                       : "/v1/chat/completions",
                         NULL, b.p ? b.p : "", b.n, col[2], col[3]);
        } else {
            fprintf(stderr, "%s:%d: unknown kind %c\n", path, lineno, kind);
            free(b.p);
            n = -1;
            break;
        }
        free(b.p);
        n++;
    }
    free(line);
    fclose(f);
    return n;
}
