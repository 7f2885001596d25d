/* fuzz_gw_req: the gateway's request-body decoder (gw_req_parse: JSON -> struct gw_req with the
 * OpenAI error for every rejected value) for chat and legacy completions, then the context check
 * with fuzzed token counts. Input: kind/flags byte, 8 bytes of numbers, body JSON. */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "fuzz.h"
#include "gw_arena.h"
#include "gw_req.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint8_t flags = fz_u8(&f);
    uint32_t prompt_tokens = fz_u32(&f);
    uint32_t max_len = fz_u32(&f);
    enum gw_req_kind kind = (flags & 1) ? GW_REQ_KIND_COMPLETION : GW_REQ_KIND_CHAT;
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    memset(&r, 0, sizeof(r));
    memset(&e, 0, sizeof(e));
    int rc = gw_req_parse(&r, kind, (const char *)f.p, f.n, (flags & 2) ? NULL : "qwen3.6", a, &e);
    if (rc == 0) {
        /* what the handlers rely on */
        if (r.n_stop < 0 || r.n_stop > GW_REQ_STOP_MAX)
            __builtin_trap();
        for (int i = 0; i < r.n_stop; i++)
            if (!r.stop[i] || strlen(r.stop[i]) > GW_REQ_STOP_LEN_MAX)
                __builtin_trap();
        if (r.top_logprobs < 0 || r.top_logprobs > GW_REQ_TOP_LOGPROBS_MAX)
            __builtin_trap();
        if (!(r.temperature >= 0 && r.temperature <= 2) || !(r.top_p > 0 && r.top_p <= 1))
            __builtin_trap();
        if (kind == GW_REQ_KIND_CHAT && !r.messages)
            __builtin_trap();
        if (kind == GW_REQ_KIND_COMPLETION && !r.prompt && !r.prompt_ids)
            __builtin_trap();
        struct gw_req_err e2;
        memset(&e2, 0, sizeof(e2));
        int64_t was = r.max_tokens;
        rc = gw_req_check_context(&r, prompt_tokens % 300000, max_len % 300000, &e2);
        if (rc == 0 && ((was < 0 && r.max_tokens < 1) || (was >= 0 && r.max_tokens != was)))
            __builtin_trap();
        if (rc != 0 && (e2.status < 400 || e2.status > 499 || !e2.message[0]))
            __builtin_trap();
    } else {
        /* a client error: a 4xx with an OpenAI message */
        if (rc != ERR_INVAL || e.status < 400 || e.status > 499 || !e.message[0] || !e.type)
            __builtin_trap();
    }
    gw_arena_destroy(a);
    return 0;
}
