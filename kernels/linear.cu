/* linear: the GEMV / GEMM dispatch target of the runner (kernels/linear.h). The GEMM path decodes
 * a quantized weight into bf16 with one 16-byte store per 8 elements (kw_dequant.cuh, the same
 * decode as moe_grouped's tiles), then runs cuBLASLt through gemm_bf16. */
#include "linear.h"

#include <cublasLt.h>
#include <string.h>

#include "cast_bf16.h"
#include "common/xalloc.h"
#include "gemm_bf16.h"
#include "gemv.h"
#include "internal/kcuda.cuh"
#include "internal/kw_dequant.cuh"
#include "internal/nvfp4_tile.cuh"
#include "internal/wdot.cuh"

struct linear_ctx {
    cublasLtHandle_t lt;
    void *ws;           // cuBLASLt workspace
    size_t ws_bytes;
    uint16_t *xb;       // (2, max_rows, max_k) bf16 activations (hi, lo parts when split)
    uint16_t *wb;       // (w_elems) bf16 decoded weight rows
    int max_rows, max_k;
    int64_t w_elems;
};

__global__ void linear_dequant_kernel(uint16_t *out, kweight w, int e, int r0, int nr)
{
    const int cpr = w.cols / 8; // chunks of 8 per row
    const int64_t n = (int64_t)nr * cpr;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / cpr), k = (int)(i % cpr) * 8;
        const uint4 v = kwd_decode_w8(w.fmt, kwd_fetch_w8(w, e, r0 + r, k));
        *reinterpret_cast<uint4 *>(out + (int64_t)r * w.cols + k) = v;
    }
}

int linear_dequant_bf16_cuda(uint16_t *out, const struct kweight *w, int expert, int r0, int nr,
                             cudaStream_t stream)
{
    if (!out || kweight_check_dev(w) || w->cols % 8 || r0 < 0 || nr < 0 || r0 + nr > w->rows ||
        expert < 0 || ((uintptr_t)out) % 16)
        return ERR_INVAL;
    if (nr == 0)
        return 0;
    const int64_t chunks = (int64_t)nr * (w->cols / 8);
    const int64_t blocks = CEIL_DIV(chunks, 256);
    linear_dequant_kernel<<<(unsigned)(blocks < 8192 ? blocks : 8192), 256, 0, stream>>>(
        out, *w, expert, r0, nr);
    return kcuda_launch_status("linear_dequant");
}

int linear_ctx_create(struct linear_ctx **out, int max_rows, int max_k, int64_t w_elems,
                      size_t ws_bytes)
{
    *out = NULL;
    if (max_rows < 1 || max_k < 8 || w_elems < 16LL * max_k)
        return ERR_INVAL;
    struct linear_ctx *c = (struct linear_ctx *)calloc(1, sizeof *c);
    if (!c)
        return ERR_NOMEM;
    int rc = ERR_NOMEM;
    c->max_rows = max_rows;
    c->max_k = max_k;
    c->w_elems = w_elems;
    c->ws_bytes = ws_bytes;
    if (cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS) {
        c->lt = NULL;
        rc = ERR_CUDA;
        goto fail;
    }
    if ((ws_bytes && cudaMalloc(&c->ws, ws_bytes) != cudaSuccess) ||
        cudaMalloc((void **)&c->xb, 2 * sizeof(uint16_t) * (size_t)max_rows * (size_t)max_k) !=
            cudaSuccess ||
        cudaMalloc((void **)&c->wb, sizeof(uint16_t) * (size_t)w_elems) != cudaSuccess) {
        (void)cudaGetLastError();
        goto fail;
    }
    *out = c;
    return 0;
fail:
    linear_ctx_destroy(c);
    return rc;
}

void linear_ctx_destroy(struct linear_ctx *c)
{
    if (!c)
        return;
    cudaFree(c->wb);
    cudaFree(c->xb);
    cudaFree(c->ws);
    if (c->lt)
        cublasLtDestroy(c->lt);
    free(c);
}

int64_t linear_ctx_bytes(const struct linear_ctx *c)
{
    return (int64_t)c->ws_bytes + 4 * (int64_t)c->max_rows * c->max_k + 2 * c->w_elems;
}

/* hi = bf16(x), lo = bf16(x - hi) */
__global__ void linear_split_kernel(uint16_t *hi, uint16_t *lo, const float *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const uint16_t h = f32_to_bf16_bits(x[i]);
        hi[i] = h;
        lo[i] = f32_to_bf16_bits(x[i] - bf16_bits_to_f32(h));
    }
}

/* y (+)= x W^T for rows ldw apart (bf16): once, or for the two parts when split */
static int linear_parts(struct linear_ctx *c, float *y, int64_t ldy, const uint16_t *w, int64_t ldw,
                        int n, int rows, int cols, bool split, cudaStream_t st)
{
    int rc = gemm_bf16_ld_cuda(y, ldy, c->xb, w, ldw, n, rows, cols, 0, c->lt, c->ws, c->ws_bytes,
                               st);
    if (rc == 0 && split)
        rc = gemm_bf16_ld_cuda(y, ldy, c->xb + (int64_t)c->max_rows * c->max_k, w, ldw, n, rows,
                               cols, 1, c->lt, c->ws, c->ws_bytes, st);
    return rc;
}

/* y[r][v] = p[r][v] + p[n + r][v]: the hi and lo parts' products of the one-pass split */
__global__ void linear_split_sum_kernel(float *y, int64_t ldy, const float *p, int n, int rows)
{
    const int64_t total = (int64_t)n * rows;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / rows), v = (int)(i - (int64_t)r * rows);
        y[r * ldy + v] = p[i] + p[total + i];
    }
}

/* The split GEMM of a bf16 weight in one pass over it: the hi rows, then the lo rows, as one
 * GEMM of 2n rows into the decoded-weight scratch (idle for bf16 weights), then their sum. Two
 * GEMMs of n rows (the second accumulating) read the weight twice: the lm_head at 4-8 rows cost
 * two cuBLASLt launches of 247 us each (H200, docs/PERF.md, twenty-fifth session), against
 * about one at 2n rows. The same sum per element (hi's product plus lo's, in fp32); the GEMM's
 * accumulation order may differ with the row count. -DLINEAR_SPLIT_ONE_PASS=0 builds the two
 * passes (tests/gpu/measure.sh sess25ab). */
#ifndef LINEAR_SPLIT_ONE_PASS
#define LINEAR_SPLIT_ONE_PASS 1
#endif

static bool split_one_pass(const struct linear_ctx *c, const struct kweight *w, int n)
{
    return LINEAR_SPLIT_ONE_PASS && w->fmt == KW_FMT_BF16 &&
           (int64_t)2 * n * w->rows * (int64_t)sizeof(float) <=
               c->w_elems * (int64_t)sizeof(uint16_t);
}

static int linear_gemm(struct linear_ctx *c, float *y, const struct kweight *w, int e,
                       const float *x, int n, bool split, cudaStream_t st)
{
    if (n > c->max_rows || w->cols > c->max_k || w->cols % 8 || kweight_check_dev(w) || e < 0)
        return ERR_INVAL;
    const int64_t nx = (int64_t)n * w->cols;
    int rc = 0;
    /* one pass: the lo rows right after the hi rows (xb holds 2 max_rows rows) */
    const bool one = split && split_one_pass(c, w, n);
    if (split) {
        const int64_t blocks = CEIL_DIV(nx, 256);
        linear_split_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, st>>>(
            c->xb, c->xb + (one ? nx : (int64_t)c->max_rows * c->max_k), x, nx);
        rc = kcuda_launch_status("linear_split");
    } else {
        rc = cast_bf16_cuda(c->xb, x, nx, st);
    }
    if (rc < 0)
        return rc;
    if (one) {
        float *p = reinterpret_cast<float *>(c->wb);
        rc = gemm_bf16_ld_cuda(
            p, w->rows, c->xb, (const uint16_t *)w->data + (int64_t)e * w->expert_stride,
            w->row_stride, 2 * n, w->rows, w->cols, 0, c->lt, c->ws, c->ws_bytes, st);
        if (rc < 0)
            return rc;
        const int64_t sb = CEIL_DIV((int64_t)n * w->rows, 256);
        linear_split_sum_kernel<<<(unsigned)(sb < 4096 ? sb : 4096), 256, 0, st>>>(y, w->rows, p, n,
                                                                                   w->rows);
        return kcuda_launch_status("linear_split_sum");
    }
    if (w->fmt == KW_FMT_BF16)
        return linear_parts(c, y, w->rows, (const uint16_t *)w->data + (int64_t)e * w->expert_stride,
                            w->row_stride, n, w->rows, w->cols, split, st);
    /* decoded row chunks: a multiple of 16 rows (16-byte aligned output columns) */
    int64_t chunk = c->w_elems / w->cols;
    chunk = chunk >= w->rows ? w->rows : chunk / 16 * 16;
    if (chunk < 1)
        return ERR_INVAL;
    for (int r0 = 0; r0 < w->rows; r0 += (int)chunk) {
        const int nr = (int)(w->rows - r0 < chunk ? w->rows - r0 : chunk);
        if ((rc = linear_dequant_bf16_cuda(c->wb, w, e, r0, nr, st)) < 0 ||
            (rc = linear_parts(c, y + r0, w->rows, c->wb, w->cols, n, nr, w->cols, split, st)) < 0)
            return rc;
    }
    return 0;
}

int linear_tiles_ok(const struct kweight *w) { return w && nvt_ok(w); }

/* LINEAR_PATH_TILES: one launch, grid (column tiles of 64, row tiles of 16 or 64) */
static int linear_tiles(float *y, const kweight *w, int e, const float *x, int n, cudaStream_t st)
{
    if (!nvt_ok(w) || e < 0 || ((uintptr_t)x) % 16 || ((uintptr_t)w->bscale) % 4 ||
        (e > 0 && w->expert_stride == 0))
        return ERR_INVAL;
    nvt_rows r;
    memset(&r, 0, sizeof r);
    r.expert = e;
    r.n_rows = n;
    r.x = x;
    r.y = y;
    const int small = n <= LINEAR_TILES_SMALL_ROWS, bm = small ? 16 : 64;
    if (CEIL_DIV((int64_t)n, bm) > 65535)
        return ERR_INVAL;
    const dim3 grid(CEIL_DIV(w->rows, NVT_BN), CEIL_DIV(n, bm));
    if (small)
        nvfp4_tile_kernel<NVT_DENSE, 16><<<grid, NVT_THREADS, 0, st>>>(*w, r, w->rows);
    else
        nvfp4_tile_kernel<NVT_DENSE, 64><<<grid, NVT_THREADS, 0, st>>>(*w, r, w->rows);
    return kcuda_launch_status("linear_tiles");
}

int linear_cuda(struct linear_ctx *c, float *y, const struct kweight *w, int expert, const float *x,
                int n, int path, cudaStream_t stream)
{
    if (!y || !w || !x || n < 1)
        return ERR_INVAL;
    if (path == LINEAR_PATH_TILES)
        return kweight_check_dev(w) < 0 ? ERR_INVAL : linear_tiles(y, w, expert, x, n, stream);
    if (path == LINEAR_PATH_GEMV)
        return gemv_cuda(y, w, expert, x, n, stream);
    if ((path == LINEAR_PATH_GEMM || path == LINEAR_PATH_GEMM_SPLIT) && c)
        return linear_gemm(c, y, w, expert, x, n, path == LINEAR_PATH_GEMM_SPLIT, stream);
    return ERR_INVAL;
}

int linear_f32_cuda(struct linear_ctx *c, float *y, const float *w, int rows, int cols,
                    const float *x, int n, cudaStream_t stream)
{
    if (!c || !y || !w || !x || n < 1 || n > c->max_rows || rows < 1 || cols < 1)
        return ERR_INVAL;
    return gemm_f32_ld_cuda(y, rows, x, w, cols, n, rows, cols, 0, c->lt, c->ws, c->ws_bytes,
                            stream);
}
