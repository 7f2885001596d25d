#!/usr/bin/env python3
"""Cut the launchers off the reviewed kernels/*.cu (or keep them, their <<<>>> launches and
kcuda_launch_pdl calls rewritten to emu_launch_cfg) and swap the PTX asm for host code, so the
real kernel bodies compile as host C++ against emu.h. Usage: gen_inc.py KERNELS_DIR OUT_DIR."""
import os
import re
import sys

kdir, out = sys.argv[1], sys.argv[2]


def read(name):
    return open(os.path.join(kdir, name)).read()


def cut(src, marker):
    i = src.index(marker)
    return src[:i]


def write(name, s):
    open(os.path.join(out, name), 'w').write(s)


def split_top(s):
    """s split at the commas outside brackets, each part stripped."""
    parts, depth, cur = [], 0, ''
    for ch in s:
        depth += ch in '([{'
        depth -= ch in ')]}'
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    return parts + [cur.strip()]


def close_paren(s, i):
    """Index just past the parenthesis closing the one at s[i]."""
    depth = 0
    for j in range(i, len(s)):
        depth += s[j] == '('
        depth -= s[j] == ')'
        if depth == 0:
            return j + 1
    raise ValueError('unbalanced parentheses')


def emu_launches(s):
    """Every `kern<T..>\n<<<grid, block[, smem[, stream]]>>>(args);` becomes
    `emu_launch_cfg(grid, block, smem, "kern<T..>", [&] { kern<T..>(args); });`: the real
    launchers run, with CUDA's launch limits checked (emu.cpp), errors reported through
    cudaGetLastError and the kernel names logged (a harness can check which path ran)."""
    res = ''
    while True:
        i = s.find('<<<')
        if i < 0:
            return res + s
        j = i
        while s[j - 1].isspace():
            j -= 1
        if s[j - 1] == '>':  # template arguments (no nested <> in the kernels)
            j = s.rindex('<', 0, j)
        while s[j - 1].isalnum() or s[j - 1] == '_':
            j -= 1
        name = ' '.join(s[j:i].split())
        k = s.index('>>>', i)
        cfg = split_top(s[i + 3:k])
        assert 2 <= len(cfg) <= 4, cfg
        p = k + 3
        while s[p].isspace():
            p += 1
        assert s[p] == '(', s[i:p + 20]
        q = close_paren(s, p)
        assert s[q] == ';', s[i:q + 20]
        smem = cfg[2] if len(cfg) > 2 else '0'
        res += s[:j] + 'emu_launch_cfg(%s, %s, %s, "%s", [&] { %s%s; });' % (
            cfg[0], cfg[1], smem, name, name, s[p:q])
        s = s[q + 1:]


def kernel_arg(s):
    """s (a call's argument text) split after its first argument, a kernel: `kern`, `kern<A, B>`
    (commas inside the template arguments), `&kern<..>` or `(kern<..>)`; returns (the kernel's
    name as source text, whitespace normalised, the rest after the comma)."""
    depth = 0
    for i, ch in enumerate(s):
        depth += ch in '([{<'
        depth -= ch in ')]}>'
        if ch == ',' and depth == 0:
            break
    else:
        raise ValueError('no arguments after the kernel: ' + s)
    name = ' '.join(s[:i].split())
    while name.startswith('(') and close_paren(name, 0) == len(name):
        name = name[1:-1].strip()
    return name.lstrip('&').strip(), s[i + 1:]


def in_comment(s, i):
    """Whether s[i] lies in a /* */ or // comment (no comment markers inside strings assumed)."""
    line = s[s.rfind('\n', 0, i) + 1:i]
    return '//' in line or s.rfind('/*', 0, i) > s.rfind('*/', 0, i)


PDL_RE = re.compile(r'\bkcuda_launch_pdl\s*\(')


def emu_pdl_launches(s):
    """Every `kcuda_launch_pdl(kern, grid, block, smem, stream, args...);` statement
    (internal/pdl.cuh) becomes `emu_launch_cfg(grid, block, smem, "kern", [&] { kern(args...); });`,
    as a <<<>>> launch (the name is the kernel's source text, as there). The launchers leave its
    value to kcuda_launch_status, so a call whose value is used is refused here."""
    res = ''
    while True:
        m = PDL_RE.search(s)
        if not m:
            return res + s
        i, p = m.start(), m.end() - 1
        if in_comment(s, i):
            res += s[:p]
            s = s[p:]
            continue
        q = close_paren(s, p)
        name, rest = kernel_arg(s[p + 1:q - 1])
        cfg = split_top(rest)
        assert len(cfg) >= 4, s[i:q]
        launch = 'emu_launch_cfg(%s, %s, %s, "%s", [&] { %s(%s); })' % (
            cfg[0], cfg[1], cfg[2], name, name, ', '.join(cfg[4:]))
        before, after = s[:i].rstrip(), s[q:].lstrip()
        assert after.startswith(';') and not before.endswith(('=', '(', ',', 'return')), \
            'kcuda_launch_pdl whose value is used: ' + s[i:q]
        res += s[:i] + launch
        s = s[q:]


MMA_RE = re.compile(r'asm volatile\(\s*"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(bf16|f16)\.'
                    r'\1\.f32 "(.*?)\);', re.S)


def mma_host(m):
    c = re.findall(r'"\+f"\(([^)]*)\)', m.group(2))
    r = re.findall(r'"r"\(([^)]*)\)', m.group(2))
    assert len(c) == 4 and len(r) == 6, m.group(0)
    back = ' '.join('%s = c_[%d];' % (v, n) for n, v in enumerate(c))
    return ('{ float c_[4] = {%s}; const uint32_t a_[4] = {%s}; %s(c_, a_, %s, %s); %s }' %
            (', '.join(c), ', '.join(r[:4]), 'emu_mma' if m.group(1) == 'bf16' else 'emu_mma_f16',
             r[4], r[5], back))


def swap_mma_all(s):
    """Every mma.sync m16n8k16 (bf16 or f16 inputs, f32 accumulators) asm statement -> emu_mma*."""
    return MMA_RE.sub(mma_host, s)


def hostify(s):
    s = swap_mma_all(emu_pdl_launches(emu_launches(s)))
    assert 'asm' not in s and '<<<' not in s
    assert all(in_comment(s, m.start()) for m in PDL_RE.finditer(s))
    return s


# cp.async on the host: the copy happens at issue time (zero-filled past src_bytes), commit and
# wait are no-ops; a kernel that reads a stage before its barrier still races under EMU_SAN=thread
os.makedirs(os.path.join(out, 'internal'), exist_ok=True)
# programmatic dependent launch on the host: every launch runs to completion before the next
# (hostify rewrites kcuda_launch_pdl into emu_launch_cfg), so there is nothing to wait for; the
# enter marks the calling thread as past its wait, for emu.cpp's check of reads before it
write('internal/pdl.cuh', '''#pragma once
void emu_pdl_enter();
static inline void kcuda_pdl_enter() { emu_pdl_enter(); }
static inline void kcuda_pdl_enter_early() { emu_pdl_enter(); }
''')
write('internal/cp_async.cuh', '''#pragma once
#include <stdint.h>
#include <string.h>
void emu_check_read(const void *p, size_t n);
static inline void cpa_copy(void *dst, const void *src, int n, int src_bytes)
{
    if (src_bytes < 0 || src_bytes > n || ((uintptr_t)dst) % n || (src_bytes && ((uintptr_t)src) % n)) {
        fprintf(stderr, "emu: cp.async of %d bytes (src_bytes %d) misaligned or too long\\n", n, src_bytes);
        abort();
    }
    memset(dst, 0, n);
    if (src_bytes) {
        emu_check_read(src, (size_t)src_bytes);
        memcpy(dst, src, src_bytes);
    }
}
static inline void cpa_16(void *dst, const void *src, int src_bytes) { cpa_copy(dst, src, 16, src_bytes); }
static inline void cpa_4(void *dst, const void *src, int src_bytes) { cpa_copy(dst, src, 4, src_bytes); }
static inline void cpa_commit() {}
template <int N> static inline void cpa_wait() {}
''')

# ldmatrix on the host: every lane publishes its row address through the warp exchange, then
# reads its elements from the rows of the lanes that own them (the PTX ISA's fragment layout)
write('internal/ldsm.cuh', '''#pragma once
#include <stdint.h>
#include <string.h>
static inline void emu_ldsm_check(const void *p)
{
    if (((uintptr_t)p) % 16) {
        fprintf(stderr, "emu: ldmatrix row address %p not 16-byte aligned\\n", p);
        abort();
    }
}
static inline void ldsm_x4(uint32_t *r, const void *p)
{
    const int L = emu_lane();
    emu_ldsm_check(p);
    for (int i = 0; i < 4; i++) {
        const char *row = (const char *)emu_xchg(p, i * 8 + L / 4);
        memcpy(&r[i], row + 4 * (L % 4), 4);
    }
}
static inline void ldsm_x4_t(uint32_t *r, const void *p)
{
    const int L = emu_lane();
    emu_ldsm_check(p);
    for (int i = 0; i < 4; i++) {
        const uint16_t *r0 = (const uint16_t *)emu_xchg(p, i * 8 + 2 * (L % 4));
        const uint16_t *r1 = (const uint16_t *)emu_xchg(p, i * 8 + 2 * (L % 4) + 1);
        r[i] = (uint32_t)r0[L / 4] | ((uint32_t)r1[L / 4] << 16);
    }
}
''')

# movmatrix on the host: lane L's word is (M[2 (L % 4)][L / 4], M[2 (L % 4) + 1][L / 4]), element
# (r, c) of M being half c % 2 of lane 4 r + c / 2's word
write('internal/movm.cuh', '''#pragma once
#include <stdint.h>
static inline uint32_t movm_t(uint32_t x)
{
    const int L = emu_lane(), c = L / 4, r0 = 2 * (L % 4);
    const uint32_t w0 = emu_xchg(x, 4 * r0 + c / 2), w1 = emu_xchg(x, 4 * (r0 + 1) + c / 2);
    const uint32_t lo = c % 2 ? w0 >> 16 : w0 & 0xffffu, hi = c % 2 ? w1 >> 16 : w1 & 0xffffu;
    return lo | (hi << 16);
}
''')

# wgmma on the host: the descriptors' start addresses are offsets into the block's dynamic shared
# memory; each thread sums its own accumulators from the operands' addresses (the 128-byte swizzle
# applied to the offset as the hardware applies it to the shared-window address, so the atoms'
# 1024-byte alignment is relative to the buffer's start); an A operand in registers comes from
# the warp's lanes through the exchange. fences, commit and wait are no-ops: the products are
# done when the call returns.
write('internal/wgmma.cuh', '''#pragma once
#include <stdint.h>
#include <string.h>
#define WG_ASM 0
template <int ROWS> static inline int wg_sw128_off(int r, int c)
{
    return (c >> 3) * ROWS * 64 + r * 64 + (((c & 7) ^ (r & 7)) << 3);
}
static inline uint32_t wg_smem(const void *p)
{
    const unsigned char *b = (const unsigned char *)p;
    if (b < g_emu_dyn_smem || b > g_emu_dyn_smem + g_emu_dyn_smem_bytes) {
        fprintf(stderr, "emu: wgmma operand %p outside the dynamic shared memory\\n", p);
        abort();
    }
    return (uint32_t)(b - g_emu_dyn_smem);
}
static inline uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3ffffu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3fffu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3fffu) << 32) | (1ull << 62);
}
static inline void wg_fence_smem() {}
static inline void wg_fence() {}
static inline void wg_commit() {}
template <int N> static inline void wg_wait() {}
template <int N> static inline void wg_hold(float (*)[4]) {}
/* element (mn, k) of a 128-byte-swizzle operand: K-major (k contiguous, 8-row groups at the
 * stride byte offset) or MN-major (mn contiguous in atoms of 64 at the leading byte offset, 8-k
 * groups at the stride byte offset) */
static inline float emu_wg_el(uint64_t desc, int mn, int k, bool mn_major, bool f16)
{
    if ((desc >> 62) != 1 || ((desc >> 49) & 7)) {
        fprintf(stderr, "emu: wgmma descriptor %016llx: only the 128-byte swizzle, base offset 0\\n",
                (unsigned long long)desc);
        abort();
    }
    const uint32_t start = (uint32_t)(desc & 0x3fffu) << 4;
    const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3fffu) << 4, sbo = (uint32_t)((desc >> 32) & 0x3fffu) << 4;
    uint32_t off = mn_major ? start + (uint32_t)(mn / 64) * lbo + (uint32_t)(k / 8) * sbo + (uint32_t)(k % 8) * 128u + (uint32_t)(mn % 64) * 2u
                            : start + (uint32_t)(mn / 8) * sbo + (uint32_t)(mn % 8) * 128u + (uint32_t)k * 2u;
    off ^= ((off >> 7) & 7u) << 4;
    if ((size_t)off + 2 > g_emu_dyn_smem_bytes) {
        fprintf(stderr, "emu: wgmma reads byte %u of %zu of shared memory\\n", off, g_emu_dyn_smem_bytes);
        abort();
    }
    uint16_t v;
    memcpy(&v, g_emu_dyn_smem + off, 2);
    return f16 ? emu_h16(v, 0) : emu_bf(v, 0);
}
/* this thread's accumulators d[4 i + e] of the m64nN tile: rows 16 (warp % 4) + lane / 4 (+ 8),
 * columns 8 i + 2 (lane % 4) + e % 2, from A(m, k) and B(n, k) */
template <int N, class FA, class FB> static inline void emu_wg_acc(float *d, bool scale_d, FA A, FB B)
{
    const int l = emu_lane(), m0 = 16 * ((int)(threadIdx.x >> 5) & 3) + l / 4;
    for (int i = 0; i < N / 8; i++)
        for (int e = 0; e < 4; e++) {
            const int m = m0 + 8 * (e >> 1), n = 8 * i + 2 * (l & 3) + (e & 1);
            double s = scale_d ? d[4 * i + e] : 0.0;
            for (int k = 0; k < 16; k++)
                s += (double)A(m, k) * B(n, k);
            d[4 * i + e] = (float)s;
        }
}
template <bool F16> static inline void wg_ss_m64n64k16(float *d, uint64_t da, uint64_t db, int scale_d)
{
    emu_wg_acc<64>(d, scale_d != 0, [&](int m, int k) { return emu_wg_el(da, m, k, false, F16); },
                   [&](int n, int k) { return emu_wg_el(db, n, k, false, F16); });
}
template <int HD, bool F16> static inline void wg_rs_k16_tb(float *d, const uint32_t *a, uint64_t db)
{
    /* the A words of the lanes holding this thread's rows: lane 4 (l / 4) + t holds (g, 2t..),
     * (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..) */
    const int l = emu_lane();
    uint32_t w[4][4];
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 4; j++)
            w[t][j] = emu_xchg(a[j], 4 * (l / 4) + t);
    const int m0 = 16 * ((int)(threadIdx.x >> 5) & 3) + l / 4;
    emu_wg_acc<HD>(d, true,
                   [&](int m, int k) {
                       const int hi = m != m0, t = (k & 7) / 2, j = (k >= 8 ? 2 : 0) + hi;
                       return F16 ? emu_h16(w[t][j], k & 1) : emu_bf(w[t][j], k & 1);
                   },
                   [&](int n, int k) { return emu_wg_el(db, n, k, true, F16); });
}
''')

s = cut(read('moe_grouped.cu'), '/* ---- launchers ---- */')
s = s.replace('#include "internal/wdot.cuh"\n', '')
s = s.replace('extern __shared__ int mg_sm[];', 'int *mg_sm = (int *)g_emu_dyn_smem;')
assert 'asm' not in s  # its mma is nvt_mma of internal/nvfp4_tile.cuh (hostified below)
write('moe_grouped_emu.inc', s)

s = cut(read('attn_prefill.cu'), 'template <typename T>\nstatic cudaError_t launch_mma')
s = s.replace('extern __shared__ float smem[];', 'float *smem = (float *)g_emu_dyn_smem;')
s = s.replace('extern __shared__ uint32_t msmem[];', 'uint32_t *msmem = (uint32_t *)g_emu_dyn_smem;')
s = s.replace('extern __shared__ __align__(16) uint16_t fsm[];', 'uint16_t *fsm = (uint16_t *)g_emu_dyn_smem;')
write('attn_prefill_emu.inc', swap_mma_all(s))

s = cut(read('sample.cu'), 'int sample_cuda(')
for op, sym in (('mul', '*'), ('add', '+'), ('sub', '-'), ('div', '/')):
    pat = '    asm("%s.rn.f32 %%0, %%1, %%2;" : "=f"(r) : "f"(a), "f"(b));\n' % op
    assert pat in s, op
    s = s.replace(pat, '    volatile float rv = a %s b;\n    r = emu_gpu_nan(rv);\n' % sym)
write('sample_emu.inc', s)

s = cut(read('logit_proc.cu'), 'int logit_proc_cuda(')
pat = '    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));\n'
assert pat in s
write('logit_proc_emu.inc', s.replace(pat, '    volatile float rv = a + b;\n    r = emu_gpu_nan(rv);\n'))

s = cut(read('attn_decode.cu'), '/* the GQA form\'s dynamic shared memory for these shapes')
s = s.replace('extern __shared__ __align__(16) uint8_t gsm[];', 'uint8_t *gsm = (uint8_t *)g_emu_dyn_smem;')
write('attn_decode_emu.inc', swap_mma_all(s))
write('kv_write_emu.inc', cut(read('kv_write.cu'), 'int kv_write_dtype_cuda('))
s = cut(read('gemm_fp8.cu'), '/* D(n, m) fp32 = op_T').replace('#include <cublasLt.h>\n', '')
a, b = s.index('void gemm_fp8_destroy'), s.index('/* One block per row')
write('gemm_fp8_emu.inc', s[:a] + s[b:])

# kernels/internal/*.cuh: host copies next to the generated .inc files, which include them as
# "internal/..." (a quoted include looks in the including file's directory first)
os.makedirs(os.path.join(out, 'internal'), exist_ok=True)
for name in sorted(os.listdir(os.path.join(kdir, 'internal'))):
    if name.endswith('.cuh') and name not in ('cp_async.cuh', 'pdl.cuh', 'ldsm.cuh', 'movm.cuh', 'wgmma.cuh'):  # host copies above
        s = hostify(read(os.path.join('internal', name)))
        s = s.replace('extern __shared__ __align__(16) unsigned char nvs_smem[];',
                      'unsigned char *nvs_smem = g_emu_dyn_smem;')
        assert 'extern __shared__' not in s, name
        write(os.path.join('internal', name), s)
# whole files, launchers included (they run on the host through emu_launch_cfg)
for name in ('gdn_seq', 'gemv', 'moe_expert', 'fused_add_rmsnorm', 'argmax', 'moe_route', 'attn_prep',
             'dummy_fill', 'rmsnorm', 'embed'):
    s = hostify(read(name + '.cu'))
    s = s.replace('extern __shared__ __align__(16) float csm[];', 'float *csm = (float *)g_emu_dyn_smem;')
    s = s.replace('extern __shared__ float row[];', 'float *row = (float *)g_emu_dyn_smem;')
    s = s.replace('extern __shared__ float part[];', 'float *part = (float *)g_emu_dyn_smem;')
    assert 'extern __shared__' not in s, name
    write(name + '_emu.inc', s)
