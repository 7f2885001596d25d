#!/usr/bin/env python3
"""Cut the launchers off the reviewed kernels/*.cu and swap the PTX asm for host code, so the
real kernel bodies compile as host C++ against emu.h. Usage: gen_inc.py KERNELS_DIR OUT_DIR."""
import os
import sys

kdir, out = sys.argv[1], sys.argv[2]


def read(name):
    return open(os.path.join(kdir, name)).read()


def cut(src, marker):
    i = src.index(marker)
    return src[:i]


def swap_mma(s, call):
    a = s.index('    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "')
    b = s.index(');\n', a) + 3
    return s[:a] + call + s[b:]


def write(name, s):
    open(os.path.join(out, name), 'w').write(s)


s = cut(read('moe_grouped.cu'), 'int moe_grouped_cuda(')
s = s.replace('#include "internal/wdot.cuh"\n', '')
s = s.replace('extern __shared__ int mg_sm[];', 'int *mg_sm = (int *)g_emu_dyn_smem;')
write('moe_grouped_emu.inc', swap_mma(s, '    emu_mma(c, a, b[0], b[1]);\n'))

s = cut(read('attn_prefill.cu'), 'template <typename T>\nstatic cudaError_t launch_mma')
s = s.replace('extern __shared__ float smem[];', 'float *smem = (float *)g_emu_dyn_smem;')
s = s.replace('extern __shared__ uint32_t msmem[];', 'uint32_t *msmem = (uint32_t *)g_emu_dyn_smem;')
write('attn_prefill_emu.inc', swap_mma(s, '    emu_mma(c, a, b0, b1);\n'))

s = cut(read('sample.cu'), 'int sample_cuda(')
for op, sym in (('mul', '*'), ('add', '+'), ('sub', '-'), ('div', '/')):
    pat = '    asm("%s.rn.f32 %%0, %%1, %%2;" : "=f"(r) : "f"(a), "f"(b));\n' % op
    assert pat in s, op
    s = s.replace(pat, '    volatile float rv = a %s b;\n    r = rv;\n' % sym)
write('sample_emu.inc', s)

write('attn_decode_emu.inc', cut(read('attn_decode.cu'), 'int attn_decode_dtype_cuda('))
write('kv_write_emu.inc', cut(read('kv_write.cu'), 'int kv_write_dtype_cuda('))
s = cut(read('gemm_fp8.cu'), '/* D(n, m) fp32 = op_T').replace('#include <cublasLt.h>\n', '')
a, b = s.index('void gemm_fp8_destroy'), s.index('/* One block per row')
write('gemm_fp8_emu.inc', s[:a] + s[b:])
