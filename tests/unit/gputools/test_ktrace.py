#!/usr/bin/env python3
"""test_ktrace.py KTRACE_PY: tests/gpu/ktrace.py on synthetic timelines whose answers are worked
out here from the construction (not from a run of the tool): a graph of four kernels launched
five times with programmatic overlap and an idle gap inside, two kernels and host time between
launches; then bad input (a missing file, no graph kernels) gives rc 1 and one line."""
import os
import re
import subprocess
import sys
import tempfile

KT = sys.argv[1]
fails = 0


def check(cond, what):
    global fails
    print('%s %s' % ('ok' if cond else 'FAIL', what))
    fails += 0 if cond else 1


def run(path, *args):
    p = subprocess.run([sys.executable, KT, path] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write(rows):
    f = tempfile.NamedTemporaryFile('w', suffix='.csv', delete=False)
    f.write('start_ns,end_ns,graph_id,graph_node,stream,grid_x,block_x,name\n')
    for r in rows:
        f.write('%d,%d,%d,%d,13,1,1,"%s"\n' % r)
    f.close()
    return f.name


# kernel k of a step lasts D[k] ns of its own; k = 1 and 3 start 300 ns before the previous
# kernel's end (a programmatic edge: they wait), k = 2 starts 200 ns after it (idle)
D = [2000, 5000, 1000, 3000]
rows, t, expect_span = [], 0, None
for step in range(5):
    t += 1000
    prev_end, first = t, t
    for k in range(4):
        s = prev_end - 300 if k in (1, 3) else prev_end + (200 if k == 2 else 0)
        e = max(s, prev_end) + D[k]
        rows.append((s, e, 7, k + 1, '_Z6kernelILi%dEEvv' % k))
        prev_end = e
    expect_span = prev_end - first  # the same every step: 2000 + 5000 + 200 + 1000 + 3000
    # outside: the lm_head 100 ns after the graph, 2000 ns; argmax 100 ns later, 300 ns; then
    # 600 ns of host time before the next launch (t += 1000 above, minus the 400 here)
    rows.append((prev_end + 100, prev_end + 2100, 0, 0, '_Z7lm_headv'))
    rows.append((prev_end + 2200, prev_end + 2500, 0, 0, '_Z6argmaxv'))
    t = prev_end + 2500
path = write(rows)
rc, out, err = run(path, '--skip', '1')
check(rc == 0, 'rc 0 (%s)' % err.strip())
m = re.search(r'steps=(\d+) kernels_per_step=(\d+) span_us=([\d.]+) idle_us=([\d.]+)', out)
check(m is not None and int(m.group(1)) == 4 and int(m.group(2)) == 4, 'four steps of four kernels')
check(m is not None and abs(float(m.group(3)) - expect_span / 1e3) < 0.05,
      'span %.1f us' % (expect_span / 1e3))
check(m is not None and abs(float(m.group(4)) - 0.2) < 0.05, 'idle 0.2 us (the gap before kernel 2)')


def charge(k):
    mm = re.search(r'^  kernel<%d>\s+(\d+)\s+([\d.]+)\s+([\d.]+)' % k, out, re.M)
    return (float(mm.group(2)), float(mm.group(3))) if mm else (None, None)


# the charge of each kernel is its own time; its mean duration includes the 300 ns it waited
for k in range(4):
    c, mean = charge(k)
    want_mean = (D[k] + (300 if k in (1, 3) else 0)) / 1e3
    check(c is not None and abs(c - D[k] / 1e3) < 0.05 and abs(mean - want_mean) < 0.01,
          'kernel<%d> charged %.1f us, mean %.2f us' % (k, D[k] / 1e3, want_mean))
m = re.search(r'between_steps=(\d+) cycle_us=([\d.]+) graph_us=([\d.]+) outside_us=([\d.]+) '
              r'idle_us=([\d.]+)', out)
check(m is not None and int(m.group(1)) == 3, 'three gaps between the four steps')
if m:
    check(abs(float(m.group(2)) - (expect_span + 3500) / 1e3) < 0.05, 'cycle = span + 3.5 us')
    check(abs(float(m.group(4)) - 2.3) < 0.05, 'outside 2.3 us (lm_head 2.0 + argmax 0.3)')
    check(abs(float(m.group(5)) - 1.2) < 0.05, 'idle 1.2 us (0.1 + 0.1 + 1.0 of host time)')
check(re.search(r'outside lm_head\s+1\.0\s+2\.0', out) is not None, 'lm_head once a gap, 2.0 us')
os.unlink(path)

rc, out, err = run('/nonexistent/trace.csv')
check(rc == 1 and len(err.strip().split('\n')) == 1, 'a missing file: rc 1, one line')
path = write([(0, 1000, 0, 0, '_Z1kv'), (2000, 3000, 0, 0, '_Z1kv')])
rc, out, err = run(path)
check(rc == 1 and 'no kernels of graph launches' in out, 'no graph kernels: rc 1, said so')
os.unlink(path)
print('failures=%d' % fails)
sys.exit(1 if fails else 0)
