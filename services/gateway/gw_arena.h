/* gw_arena: per-request bump allocator with cleanups (STYLE.md §4). Created when a request
 * is parsed, destroyed after its last response byte; cleanups run in reverse order on
 * destroy. Allocations abort on OOM (small, bounded by the request limits). */
#ifndef GW_ARENA_H
#define GW_ARENA_H

#include <stddef.h>

struct gw_arena;

typedef void (*gw_arena_cleanup_fn)(void *ctx);

/* chunk: bytes per block (0 = 4 KiB). Never NULL (aborts on OOM). */
struct gw_arena *gw_arena_create(size_t chunk);
/* Runs cleanups (last added first), frees everything. NULL is a no-op. */
void gw_arena_destroy(struct gw_arena *a);
/* n bytes, 16-aligned, zeroed. */
void *gw_arena_alloc(struct gw_arena *a, size_t n);
/* Copy of s[0..n) plus a NUL. */
char *gw_arena_strndup(struct gw_arena *a, const char *s, size_t n);
char *gw_arena_strdup(struct gw_arena *a, const char *s);
/* Register fn(ctx) to run at destroy. */
void gw_arena_cleanup_add(struct gw_arena *a, gw_arena_cleanup_fn fn, void *ctx);

#endif
