/* kshim: the CUDA runtime stand-in and every *_cuda launcher mapped onto its *_ref. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_runtime.h"
#include "argmax.h"
#include "attn_decode.h"
#include "embed.h"
#include "fused_add_rmsnorm.h"
#include "gdn_conv.h"
#include "gdn_seq.h"
#include "gdn_step.h"
#include "gemv.h"
#include "kv_write.h"
#include "moe_expert.h"
#include "moe_route.h"
#include "rmsnorm.h"
#include "rope.h"

cudaError_t cudaMalloc(void **p, size_t n) { *p = malloc(n); memset(*p, 0x7f, n); return 0; }
cudaError_t cudaFree(void *p) { free(p); return 0; }
cudaError_t cudaMallocHost(void **p, size_t n) { *p = malloc(n); return 0; }
cudaError_t cudaFreeHost(void *p) { free(p); return 0; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) { (void)k; memcpy(d, s, n); return 0; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st) { (void)st; return cudaMemcpy(d, s, n, k); }
cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                              enum cudaMemcpyKind k, cudaStream_t st)
{
    (void)k; (void)st;
    if (w > dp || w > sp) return 1;
    for (size_t i = 0; i < h; i++) memmove((char *)d + i * dp, (const char *)s + i * sp, w);
    return 0;
}
cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return 0; }
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st) { (void)st; memset(d, v, n); return 0; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned f) { (void)f; *st = (cudaStream_t)(uintptr_t)1; return 0; }
cudaError_t cudaStreamSynchronize(cudaStream_t st) { (void)st; return 0; }
cudaError_t cudaStreamDestroy(cudaStream_t st) { (void)st; return 0; }
cudaError_t cudaSetDevice(int d) { (void)d; return 0; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) { (void)d; p->major = 9; p->minor = 0; strcpy(p->name, "shim H200"); return 0; }
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return 0; }
cudaError_t cudaGetLastError(void) { return 0; }
const char *cudaGetErrorString(cudaError_t e) { (void)e; return "shim"; }

int gemv_cuda(float *y, const struct kweight *w, int e, const float *x, int n, cudaStream_t s) { (void)s; return gemv_ref(y, w, e, x, n); }
void shim_tie_check(const float *l, int n, int E, int k);
int moe_route_cuda(int32_t *ids, float *w, const float *l, int n, int E, int k, cudaStream_t s) { (void)s; if (E > 2) shim_tie_check(l, n, E, k); return moe_route_ref(ids, w, l, n, E, k); }
int moe_expert_cuda(float *out, float *ws, const float *x, const int32_t *ids, const float *w, int n, int k, int E,
                    const struct kweight *gu, const struct kweight *dn, int acc, cudaStream_t s)
{ (void)s; return moe_expert_ref(out, ws, x, ids, w, n, k, E, gu, dn, acc); }
int rmsnorm_cuda(float *o, const float *x, const float *w, int n, int d, float eps, float off, cudaStream_t s) { (void)s; return rmsnorm_ref(o, x, w, n, d, eps, off); }
int fused_add_rmsnorm_cuda(float *o, float *r, const float *x, const float *w, int n, int d, float eps, float off, cudaStream_t s) { (void)s; return fused_add_rmsnorm_ref(o, r, x, w, n, d, eps, off); }
int embed_cuda(float *o, const uint16_t *t, const int32_t *ids, int n, int d, int v, cudaStream_t s) { (void)s; return embed_ref(o, t, ids, n, d, v); }
int gdn_conv_cuda(float *o, float *st, const float *x, const float *w, const int32_t *sl, int n, int c, int kc, cudaStream_t s) { (void)s; return gdn_conv_ref(o, st, x, w, sl, n, c, kc); }
int gdn_step_cuda(float *out, float *state, const float *qkv, const float *z, const float *a, const float *b, const float *al,
                  const float *dt, const float *nw, const int32_t *sl, int n, int hk, int hv, float eps, cudaStream_t s)
{ (void)s; return gdn_step_ref(out, state, qkv, z, a, b, al, dt, nw, sl, n, hk, hv, eps); }
int rope_cuda(float *x, const int32_t *pos, int n, int h, int hd, int rd, int64_t ts, int64_t hs, float th, cudaStream_t s) { (void)s; return rope_ref(x, pos, n, h, hd, rd, ts, hs, th); }
int kv_write_cuda(uint16_t *kc, uint16_t *vc, const float *k, const float *v, const int32_t *m, int n, int h, int d, cudaStream_t s) { (void)s; return kv_write_ref(kc, vc, k, v, m, n, h, d); }
int attn_decode_cuda(float *out, float *ws, const float *q, const float *g, const uint16_t *kc, const uint16_t *vc, const int32_t *bt,
                     const int32_t *sl, int n, int hq, int hkv, int d, int bs, int mb, int ml, float sc, cudaStream_t s)
{ (void)s; return attn_decode_ref(out, ws, q, g, kc, vc, bt, sl, n, hq, hkv, d, bs, mb, ml, sc); }
int kv_write_dtype_cuda(void *kc, void *vc, const float *k, const float *v, const int32_t *m, int n, int h, int d,
                        int dt, float ks, float vs, cudaStream_t s)
{ (void)s; return kv_write_dtype_ref(kc, vc, k, v, m, n, h, d, dt, ks, vs); }
int attn_decode_dtype_cuda(float *out, float *ws, const float *q, const float *g, const void *kc, const void *vc, int dt,
                           float ks, float vs, const int32_t *bt, const int32_t *sl, int n, int hq, int hkv, int d,
                           int bs, int mb, int ml, float sc, cudaStream_t s)
{ (void)s; return attn_decode_dtype_ref(out, ws, q, g, kc, vc, dt, ks, vs, bt, sl, n, hq, hkv, d, bs, mb, ml, sc); }
int gdn_seq_conv_cuda(float *o, float *st, float *snap, int ns, const float *x, const float *w, const int32_t *it,
                      int ni, int mr, int c, int kc, cudaStream_t s)
{ (void)s; (void)mr; return gdn_seq_conv_ref(o, st, snap, ns, x, w, it, ni, c, kc); }
int gdn_seq_step_cuda(float *out, float *state, float *snap, int ns, const float *qkv, const float *z, const float *a,
                      const float *b, const float *al, const float *dt, const float *nw, const int32_t *it, int ni,
                      int hk, int hv, float eps, cudaStream_t s)
{ (void)s; return gdn_seq_step_ref(out, state, snap, ns, qkv, z, a, b, al, dt, nw, it, ni, hk, hv, eps); }
int argmax_cuda(int32_t *ids, const float *l, int n, int v, cudaStream_t s) { (void)s; return argmax_ref(ids, l, n, v); }
/* debug: report near-ties at the k-th routing slot */
#include <stdio.h>
#include <math.h>
void shim_tie_check(const float *l, int n, int E, int k);
void shim_tie_check(const float *l, int n, int E, int k)
{
    for (int t = 0; t < n; t++) {
        const float *r = l + (size_t)t * E;
        float s[1024]; for (int e = 0; e < E; e++) s[e] = r[e];
        float kth = 0, next = 0;
        for (int j = 0; j <= k && j < E; j++) { int b = 0; for (int e = 1; e < E; e++) if (s[e] > s[b]) b = e; if (j == k - 1) kth = s[b]; if (j == k) next = s[b]; s[b] = -INFINITY; }
        if (k < E && fabsf(kth - next) < 1e-4f * fmaxf(1.0f, fabsf(kth))) fprintf(stderr, "NEAR_TIE E=%d k=%d kth=%.9g next=%.9g\n", E, k, kth, next);
    }
}
cudaError_t cudaStreamBeginCapture(cudaStream_t st, int mode) { (void)st; (void)mode; return 1; }
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g) { (void)st; *g = NULL; return 1; }
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long f) { (void)e; (void)g; (void)f; return 1; }
cudaError_t cudaGraphDestroy(cudaGraph_t g) { (void)g; return 0; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { (void)e; return 0; }
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t st) { (void)e; (void)st; return 1; }
