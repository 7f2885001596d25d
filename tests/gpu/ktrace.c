/* tests/gpu/ktrace.c: libktrace.so, a CUPTI injection library that records when every kernel ran
 * on the GPU, the kernels of CUDA graph launches included (ncu measures kernels one at a time,
 * serialised; this is the timeline as it runs, programmatic edges and all), and writes one CSV
 * line per kernel at exit. Load it into any CUDA program of the build:
 *   CUDA_INJECTION64_PATH=build/lib/libktrace.so KTRACE_OUT=trace.csv gpu_bench ...
 * then tests/gpu/ktrace.py summarises the graph launches (the decode steps). Columns: start_ns,
 * end_ns (GPU clock), graph_id (0: not in a graph), graph_node, stream, grid_x, block_x, name
 * (mangled, quoted). The CUDA driver calls InitializeInjection once, before the program's first
 * CUDA call returns; CUPTI's buffer callbacks take no user pointer, so the output file is the
 * one piece of state the library keeps (static, this file only). */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define KTRACE_BUF_BYTES (8u << 20)

static FILE *ktrace_out; /* CUPTI's callbacks carry no context: the one global, see above */

#define KTRACE_TRY(call)                                                                           \
    do {                                                                                           \
        const CUptiResult r_ = (call);                                                             \
        if (r_ != CUPTI_SUCCESS) {                                                                 \
            const char *s_ = NULL;                                                                 \
            cuptiGetResultString(r_, &s_);                                                         \
            fprintf(stderr, "ktrace: %s failed: %s\n", #call, s_ ? s_ : "?");                      \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

static void CUPTIAPI ktrace_buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(8, KTRACE_BUF_BYTES);
    *size = *buf ? KTRACE_BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI ktrace_buf_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buf,
                                         size_t size, size_t valid)
{
    (void)ctx;
    (void)stream_id;
    (void)size;
    CUpti_Activity *rec = NULL;
    while (ktrace_out && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        fprintf(ktrace_out, "%llu,%llu,%u,%llu,%u,%d,%d,\"%s\"\n", (unsigned long long)k->start,
                (unsigned long long)k->end, k->graphId, (unsigned long long)k->graphNodeId,
                k->streamId, k->gridX, k->blockX, k->name ? k->name : "?");
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
        fprintf(stderr, "ktrace: %zu records dropped\n", dropped);
    free(buf);
}

static void ktrace_finish(void)
{
    cuptiActivityFlushAll(1);
    if (ktrace_out) {
        fclose(ktrace_out);
        ktrace_out = NULL;
    }
}

int InitializeInjection(void);
int InitializeInjection(void)
{
    const char *path = getenv("KTRACE_OUT");
    ktrace_out = fopen(path && *path ? path : "ktrace.csv", "w");
    if (!ktrace_out) {
        fprintf(stderr, "ktrace: cannot write %s\n", path && *path ? path : "ktrace.csv");
        return 0;
    }
    fprintf(ktrace_out, "start_ns,end_ns,graph_id,graph_node,stream,grid_x,block_x,name\n");
    KTRACE_TRY(cuptiActivityRegisterCallbacks(ktrace_buf_request, ktrace_buf_complete));
    KTRACE_TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    atexit(ktrace_finish);
    return 1;
}
