/* gw_arena: chunked bump allocator; big requests get their own block. */
#include "gw_arena.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

struct arena_block {
    struct arena_block *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    _Alignas(16) unsigned char data[];
};

struct arena_cleanup {
    struct arena_cleanup *next;
    gw_arena_cleanup_fn fn;
    void *ctx;
};

struct gw_arena {
    size_t chunk;
    struct arena_block *blocks;
    struct arena_cleanup *cleanups;
};

struct gw_arena *gw_arena_create(size_t chunk)
{
    struct gw_arena *a = xcalloc(1, sizeof(*a));
    a->chunk = chunk ? chunk : 4096;
    return a;
}

void gw_arena_destroy(struct gw_arena *a)
{
    if (!a)
        return;
    while (a->cleanups) {
        struct arena_cleanup *c = a->cleanups;
        a->cleanups = c->next;
        c->fn(c->ctx);
    }
    while (a->blocks) {
        struct arena_block *b = a->blocks;
        a->blocks = b->next;
        free(b);
    }
    free(a);
}

void *gw_arena_alloc(struct gw_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    struct arena_block *b = a->blocks;
    if (!b || b->size - b->used < n) {
        size_t sz = n > a->chunk ? n : a->chunk;
        b = xmalloc(sizeof(*b) + sz);
        b->size = sz;
        b->used = 0;
        if (n > a->chunk && a->blocks) {
            /* oversized: keep the current block as the bump target */
            b->next = a->blocks->next;
            a->blocks->next = b;
        } else {
            b->next = a->blocks;
            a->blocks = b;
        }
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *gw_arena_strndup(struct gw_arena *a, const char *s, size_t n)
{
    char *p = gw_arena_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *gw_arena_strdup(struct gw_arena *a, const char *s)
{
    return gw_arena_strndup(a, s, strlen(s));
}

void gw_arena_cleanup_add(struct gw_arena *a, gw_arena_cleanup_fn fn, void *ctx)
{
    struct arena_cleanup *c = gw_arena_alloc(a, sizeof(*c));
    c->fn = fn;
    c->ctx = ctx;
    c->next = a->cleanups;
    a->cleanups = c;
}
