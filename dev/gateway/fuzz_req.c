/* libFuzzer harness (scratch): gw_req_parse on arbitrary bodies, and gw_sse_next on arbitrary
 * streams. Build: see fuzz.sh. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gw_arena.h"
#include "common/buf.h"
#include "gw_req.h"
#include "gw_sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    for (int k = 0; k < 2; k++)
        if (gw_req_parse(&r, (enum gw_req_kind)k, (const char *)data, size, "m", a, &e) == 0)
            (void)gw_req_check_context(&r, (int64_t)(size % 300), 256, &e);
    gw_arena_destroy(a);
    struct buf d;
    buf_init(&d);
    size_t off = 0, used;
    while (off < size && (used = gw_sse_next((const char *)data + off, size - off, &d)) > 0)
        off += used;
    buf_deinit(&d);
    return 0;
}
