#include "emu.h"

emu_block *g_emu_block;
thread_local dim3 threadIdx_;
dim3 blockIdx_, blockDim_, gridDim_;
unsigned char *g_emu_dyn_smem;

struct emu_arg {
    int tid;
    const std::function<void()> *body;
};

static void *emu_thread(void *p)
{
    emu_arg *a = (emu_arg *)p;
    threadIdx_ = dim3(a->tid, 0, 0);
    (*a->body)();
    return NULL;
}

void emu_launch(dim3 grid, int nthreads, const std::function<void()> &body, size_t smem)
{
    static emu_block blk;
    gridDim_ = grid;
    blockDim_ = dim3(nthreads, 1, 1);
    g_emu_block = &blk;
    pthread_barrier_init(&blk.bar, NULL, nthreads);
    for (int w = 0; w < (nthreads + 31) / 32; w++)
        pthread_barrier_init(&blk.warps[w].bar, NULL, 32);
    std::vector<pthread_t> th(nthreads);
    std::vector<emu_arg> args(nthreads);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx_ = dim3(x, y, z);
                g_emu_dyn_smem = (unsigned char *)malloc(smem ? smem : 1);
                memset(g_emu_dyn_smem, 0xcd, smem);
                for (int t = 0; t < nthreads; t++) {
                    args[t] = {t, &body};
                    if (pthread_create(&th[t], &attr, emu_thread, &args[t]) != 0) {
                        fprintf(stderr, "pthread_create failed\n");
                        exit(1);
                    }
                }
                for (int t = 0; t < nthreads; t++)
                    pthread_join(th[t], NULL);
                free(g_emu_dyn_smem);
                g_emu_dyn_smem = NULL;
            }
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&blk.bar);
    for (int w = 0; w < (nthreads + 31) / 32; w++)
        pthread_barrier_destroy(&blk.warps[w].bar);
}
