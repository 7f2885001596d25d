#include "emu.h"

emu_block *g_emu_block;
thread_local dim3 threadIdx_;
dim3 blockIdx_, blockDim_, gridDim_;
unsigned char *g_emu_dyn_smem;
size_t g_emu_dyn_smem_bytes;

/* One pthread per CUDA thread for the whole launch: the threads run the grid's blocks one after
 * another, released block by block through start/end barriers (the main thread sets blockIdx and
 * the dynamic shared memory in between), so a block costs two barriers, not nthreads creations. */
struct emu_pool {
    pthread_barrier_t start, end;
    const std::function<void()> *body;
    bool quit;
};
struct emu_arg {
    int tid;
    emu_pool *pool;
};

/* the reads-before-kcuda_pdl_enter check (emu.h): the guarded ranges, whether this thread has
 * passed its enter in the current block */
static std::vector<std::pair<uintptr_t, uintptr_t>> g_emu_guard;
std::atomic<long> g_emu_prewait_reads;
static thread_local bool t_emu_waited;

void emu_pdl_guard_add(const void *p, size_t n)
{
    g_emu_guard.emplace_back((uintptr_t)p, (uintptr_t)p + n);
}
void emu_pdl_guard_clear() { g_emu_guard.clear(); }
void emu_pdl_enter() { t_emu_waited = true; }
void emu_check_read(const void *p, size_t n)
{
    if (t_emu_waited || g_emu_guard.empty())
        return;
    const uintptr_t a = (uintptr_t)p, e = a + n;
    for (const auto &r : g_emu_guard)
        if (a < r.second && r.first < e) {
            if (g_emu_prewait_reads++ == 0)
                fprintf(stderr, "emu: block (%u,%u,%u) thread %u read %zu bytes at %p before its "
                                "kcuda_pdl_enter, written by the kernel before\n",
                        blockIdx_.x, blockIdx_.y, blockIdx_.z, threadIdx_.x, n, p);
            return;
        }
}

static void *emu_thread(void *p)
{
    emu_arg *a = (emu_arg *)p;
    threadIdx_ = dim3(a->tid, 0, 0);
    for (;;) {
        pthread_barrier_wait(&a->pool->start);
        if (a->pool->quit)
            return NULL;
        t_emu_waited = false; /* a new block: before its enter */
        (*a->pool->body)();
        pthread_barrier_wait(&a->pool->end);
    }
}

void emu_launch(dim3 grid, int nthreads, const std::function<void()> &body, size_t smem)
{
    static emu_block blk;
    if (nthreads <= 0 || nthreads > 1024 || nthreads % 32) { /* whole warps only (warp barriers of 32) */
        fprintf(stderr, "emu_launch: %d threads per block not supported\n", nthreads);
        exit(1);
    }
    gridDim_ = grid;
    blockDim_ = dim3(nthreads, 1, 1);
    g_emu_block = &blk;
    pthread_barrier_init(&blk.bar, NULL, nthreads);
    for (int w = 0; w < nthreads / 32; w++)
        pthread_barrier_init(&blk.warps[w].bar, NULL, 32);
    emu_pool pool;
    pthread_barrier_init(&pool.start, NULL, nthreads + 1);
    pthread_barrier_init(&pool.end, NULL, nthreads + 1);
    pool.body = &body;
    pool.quit = false;
    std::vector<pthread_t> th(nthreads);
    std::vector<emu_arg> args(nthreads);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int t = 0; t < nthreads; t++) {
        args[t] = {t, &pool};
        if (pthread_create(&th[t], &attr, emu_thread, &args[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(1);
        }
    }
    const char *order = getenv("EMU_BLOCK_ORDER");
    const bool rev = order && strcmp(order, "reverse") == 0;
    const uint64_t nb = (uint64_t)grid.x * grid.y * grid.z;
    for (uint64_t i = 0; i < nb; i++) {
        const uint64_t b = rev ? nb - 1 - i : i;
        blockIdx_ = dim3((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                         (unsigned)(b / grid.x / grid.y));
        g_emu_dyn_smem = (unsigned char *)malloc(smem ? smem : 1);
        g_emu_dyn_smem_bytes = smem;
        memset(g_emu_dyn_smem, 0xcd, smem);
        pthread_barrier_wait(&pool.start);
        pthread_barrier_wait(&pool.end);
        free(g_emu_dyn_smem);
        g_emu_dyn_smem = NULL;
    }
    pool.quit = true;
    pthread_barrier_wait(&pool.start);
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&pool.start);
    pthread_barrier_destroy(&pool.end);
    pthread_barrier_destroy(&blk.bar);
    for (int w = 0; w < nthreads / 32; w++)
        pthread_barrier_destroy(&blk.warps[w].bar);
}

int g_emu_bad_launches;
std::string g_emu_launched;
static cudaError_t g_emu_last_error = cudaSuccess;

extern "C" float rsqrtf(float x) { return 1.0f / sqrtf(x); }

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = g_emu_last_error;
    g_emu_last_error = cudaSuccess;
    return e;
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess ? "no error" : "invalid configuration argument (emulated launch check)";
}

/* The device the launchers ask about: one, of EMU_SMS streaming multiprocessors (default 132,
 * an H100 / H200; 0 makes the launchers take the forms they use where the count is unknown,
 * the nvfp4 stream kernel's 8-warp one). */
extern "C" cudaError_t cudaGetDevice(int *dev)
{
    *dev = 0;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int dev)
{
    (void)dev;
    if (attr != cudaDevAttrMultiProcessorCount)
        return cudaErrorInvalidValue;
    const char *e = getenv("EMU_SMS");
    *value = e && atoi(e) >= 0 ? atoi(e) : 132; /* 0: no SM count, as a failed query */
    return cudaSuccess;
}

/* The largest dynamic shared memory opted into so far (any kernel: the emulator does not tell
 * kernels apart here), at most an sm_120's 101,376 bytes, the smallest of the targets. */
static int g_emu_smem_optin = 48 * 1024;

extern "C" cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr,
                                            int value)
{
    (void)func;
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > 101376) {
            fprintf(stderr, "emu: cudaFuncSetAttribute max dynamic smem %d refused (sm_120: "
                            "101376)\n", value);
            return cudaErrorInvalidValue;
        }
        if (value > g_emu_smem_optin)
            g_emu_smem_optin = value;
    }
    return cudaSuccess;
}

void emu_launch_cfg(dim3 grid, dim3 block, size_t smem, const char *name,
                    const std::function<void()> &body)
{
    const unsigned nt = block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
        grid.z > 65535 || block.y != 1 || block.z != 1 || nt == 0 || nt > 1024 || nt % 32 ||
        smem > (size_t)g_emu_smem_optin) {
        fprintf(stderr, "emu: launch of %s refused grid=(%u,%u,%u) block=(%u,%u,%u) smem=%zu\n",
                name, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem);
        g_emu_bad_launches++;
        g_emu_last_error = cudaErrorInvalidConfiguration;
        return;
    }
    g_emu_launched += name;
    g_emu_launched += ';';
    emu_launch(grid, (int)nt, body, smem);
}
