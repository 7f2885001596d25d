/* api_fields: the parser of docs/API.md's field list (see api_fields.h). */
#include "api_fields.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define CELLS_MAX 8

const char *api_ep_name(unsigned ep)
{
    return ep == API_EP_CHAT ? "chat" : ep == API_EP_COMPLETIONS ? "completions" : "responses";
}

static void trim(char *s)
{
    size_t n = strlen(s), i = 0;
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    while (isspace((unsigned char)s[i]))
        i++;
    memmove(s, s + i, n - i + 1);
}

/* the next `code` span of s into out; returns the rest after it, NULL when there is none */
static const char *code_span(const char *s, char *out, size_t cap)
{
    const char *a = strchr(s, '`');
    const char *b = a ? strchr(a + 1, '`') : NULL;
    if (!b || (size_t)(b - a - 1) >= cap)
        return NULL;
    memcpy(out, a + 1, (size_t)(b - a - 1));
    out[b - a - 1] = '\0';
    return b + 1;
}

/* split one table line into cells (| outside `code` separates) */
static int split(const char *line, size_t len, char cells[CELLS_MAX][1024])
{
    int n = -1; /* the text before the first | is not a cell */
    size_t k = 0;
    bool code = false;
    for (size_t i = 0; i < len; i++) {
        char c = line[i];
        if (c == '`')
            code = !code;
        if (c == '|' && !code) {
            if (n >= 0) {
                cells[n][k] = '\0';
                trim(cells[n]);
            }
            if (++n >= CELLS_MAX)
                return -1;
            k = 0;
            continue;
        }
        if (n >= 0 && k + 1 < sizeof(cells[0]))
            cells[n][k++] = c;
    }
    return n; /* cells closed by a | */
}

static int bad(int line, const char *why, const char *what)
{
    fprintf(stderr, "docs/API.md:%d: %s%s%s\n", line, why, what ? ": " : "", what ? what : "");
    return -1;
}

static int parse_row(char cells[CELLS_MAX][1024], int line, struct api_field *f)
{
    memset(f, 0, sizeof(*f));
    f->line = line;
    if (!code_span(cells[0], f->name, sizeof(f->name)) || !f->name[0])
        return bad(line, "the field is not a `name`", cells[0]);
    char eps[1024];
    snprintf(eps, sizeof(eps), "%s", cells[1]);
    for (char *save = NULL, *t = strtok_r(eps, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (!strcmp(t, "chat"))
            f->eps |= API_EP_CHAT;
        else if (!strcmp(t, "completions"))
            f->eps |= API_EP_COMPLETIONS;
        else if (!strcmp(t, "responses"))
            f->eps |= API_EP_RESPONSES;
        else
            return bad(line, "unknown endpoint", t);
    }
    if (!f->eps)
        return bad(line, "no endpoint", NULL);
    const char *rest = code_span(cells[2], f->value, sizeof(f->value));
    if (!rest)
        return bad(line, "the value is not a `json` span", cells[2]);
    const char *w = strstr(rest, " with ");
    if (w && !code_span(w, f->with, sizeof(f->with)))
        return bad(line, "'with' needs a `{...}` span", cells[2]);
    if (!strcmp(cells[3], "effect"))
        f->cls = API_CLASS_EFFECT;
    else if (!strcmp(cells[3], "ignored"))
        f->cls = API_CLASS_IGNORED;
    else if (!strcmp(cells[3], "refused"))
        f->cls = API_CLASS_REFUSED;
    else
        return bad(line, "the class is not effect, ignored or refused", cells[3]);
    if (!cells[4][0] || !cells[5][0])
        return bad(line, "the tern and vLLM columns must say something", NULL);
    const char *p = cells[6];
    for (int i = 0; i < API_TESTED_MAX && p; i++)
        p = code_span(p, f->tested[i], sizeof(f->tested[i]));
    return 0;
}

int api_fields_parse(const char *text, struct api_field *out, int max)
{
    const char *begin = strstr(text, "<!-- field-list:begin -->");
    const char *end = begin ? strstr(begin, "<!-- field-list:end -->") : NULL;
    if (!end)
        return bad(0, "no <!-- field-list:begin --> ... <!-- field-list:end --> block", NULL);
    int line = 1, n = 0, rows = 0;
    for (const char *p = text; p < begin; p++)
        line += *p == '\n';
    static char cells[CELLS_MAX][1024];
    for (const char *p = begin; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (len && p[0] == '|') {
            int nc = split(p, len, cells);
            if (nc != 7)
                return bad(line, "a row needs 7 cells", NULL);
            if (rows++ >= 2) { /* the header and the --- line come first */
                if (n >= max)
                    return bad(line, "too many rows", NULL);
                if (parse_row(cells, line, &out[n]) < 0)
                    return -1;
                n++;
            }
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    return n;
}
