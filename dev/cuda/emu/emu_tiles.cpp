// The pipelined NVFP4 tile kernel's dense mode (internal/nvfp4_tile.cuh, LINEAR_PATH_TILES) on the
// host emulator vs linear_gemm_ref (x and the decoded weight rounded to bf16, double
// accumulation): 16- and 64-row tiles, partial row and column tiles, K % 128 == 64 (a half last
// stage of the 16-row tiles), an expert other than 0. Tolerance as ktest_linear's GEMM path:
// |err| <= 1e-4 sqrt(K) max|y| + 1e-3 |y| (only the fp32 accumulation order differs).
#include "emu.h"
#include "internal/nvfp4_tile.cuh"

extern "C" {
#include "kdtype.h"
#include "linear.h"
}

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint32_t ru32() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)(ru32() & 0xffffff) / 16777216.0f; }

static int run(int rows, int cols, int n, int E, int e, int bm)
{
    kweight w;
    memset(&w, 0, sizeof w);
    const size_t ne = (size_t)E * rows * cols;
    uint8_t *d = (uint8_t *)emu_alloc(ne / 2), *bs = (uint8_t *)emu_alloc(ne / 16);
    float *g = (float *)malloc(sizeof(float) * E);
    for (size_t i = 0; i < ne / 2; i++) d[i] = (uint8_t)ru32();
    for (size_t i = 0; i < ne / 16; i++) bs[i] = (uint8_t)(0x08 + ru32() % (0x7e - 0x08 + 1));
    for (int i = 0; i < E; i++) g[i] = runi(1e-3f, 1e-2f);
    w.fmt = KW_FMT_NVFP4; w.rows = rows; w.cols = cols; w.row_stride = cols;
    w.expert_stride = E > 1 ? (int64_t)rows * cols : 0;
    w.data = d; w.bscale = bs; w.bscale_stride = cols / 16;
    w.bscale_expert_stride = E > 1 ? (int64_t)rows * (cols / 16) : 0;
    w.gscale = g[0]; w.gscale_e = E > 1 ? g : NULL;
    float *x = (float *)emu_alloc(sizeof(float) * (size_t)n * cols);
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = runi(-1, 1);
    float *got = (float *)emu_alloc(sizeof(float) * (size_t)n * rows), *ref = (float *)malloc(sizeof(float) * (size_t)n * rows);
    for (size_t i = 0; i < (size_t)n * rows; i++) got[i] = NAN;
    int rc = linear_gemm_ref(ref, &w, e, x, n);
    if (!nvt_ok(&w)) { printf("tiles emu: nvt_ok refused a valid weight\n"); return 1; }
    nvt_rows r;
    memset(&r, 0, sizeof r);
    r.expert = e; r.n_rows = n; r.x = x; r.y = got;
    const dim3 grid((rows + NVT_BN - 1) / NVT_BN, (n + bm - 1) / bm);
    if (bm == 16)
        emu_launch(grid, NVT_THREADS, [&] { nvfp4_tile_kernel<NVT_DENSE, 16>(w, r, rows); });
    else
        emu_launch(grid, NVT_THREADS, [&] { nvfp4_tile_kernel<NVT_DENSE, 64>(w, r, rows); });
    double amax = 0, worst = 0;
    for (size_t i = 0; i < (size_t)n * rows; i++) amax = fmax(amax, fabs((double)ref[i]));
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)n * rows; i++) {
        const double err = fabs((double)got[i] - ref[i]);
        worst = fmax(worst, err);
        if (!(err <= 1e-4 * sqrt((double)cols) * amax + 1e-3 * fabs(ref[i]))) {
            if (bad < 3) printf("  mismatch %zu got %g ref %g\n", i, got[i], ref[i]);
            bad++;
        }
    }
    printf("tiles emu bm=%d rows=%d cols=%d n=%d E=%d e=%d: max_err/amax=%.2e bad=%zu rc=%d %s\n", bm, rows,
           cols, n, E, e, amax > 0 ? worst / amax : worst, bad, rc, bad || rc ? "FAIL" : "ok");
    return bad || rc;
}

int main()
{
    int f = 0;
    f += run(200, 256, 1, 1, 0, 16);  /* one row, a partial column tile */
    f += run(130, 320, 19, 1, 0, 16); /* two row tiles (the second partial), K % 128 == 64 */
    f += run(64, 192, 70, 3, 2, 64);  /* 64-row tiles: two (the second partial), expert 2 */
    f += run(100, 128, 5, 2, 1, 64);  /* few rows in a 64-row tile */
    printf("failures=%d\n", f);
    return f != 0;
}
