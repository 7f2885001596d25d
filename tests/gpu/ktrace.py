#!/usr/bin/env python3
"""tests/gpu/ktrace.py: summarise a libktrace.so trace (tests/gpu/ktrace.c) of the graph launches.

   ktrace.py TRACE.csv [--skip N] [--top N]

Each launch of a CUDA graph is one decode step (gpu_bench and the worker capture the layer stack
of a step; prefill runs eagerly). Launches are told apart by a node id seen again. The first N
launches (--skip, default 2: warm-up) are left out. Per step: the span (first kernel's start to
the last one's end), the idle time (no kernel of the step on the GPU), and per kernel name its
launches a step, its mean duration, and its share of the critical path: a kernel is charged from
the later of its own start and the previous kernels' last end up to its own end (with
programmatic edges a kernel starts before the one before it ends, then waits for it: that wait is
the earlier kernel's time, not its own). The charges and the idle time add up to the span.
Then, between one step's graph and the next: the cycle (graph start to graph start), the kernels
outside the graph (lm_head, sampling, copies) charged the same way, and the idle time (the GPU
ran nothing of the program: host work and synchronisation).
"""
import collections
import csv
import shutil
import subprocess
import sys


def demangle(names):
    if not shutil.which('c++filt'):
        return {n: n for n in names}
    names = list(names)
    out = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True,
                         text=True).stdout.split('\n')
    return {n: (out[i] if i < len(out) and out[i] else n) for i, n in enumerate(names)}


def short(name):
    # "void nvs_kernel<2, 1, 0, 0>(kweight, nvs_args, nvs_more)" -> "nvs_kernel<2, 1, 0, 0>"
    if name.startswith('void '):
        name = name[5:]
    depth = 0
    for i, c in enumerate(name):
        if c == '<':
            depth += 1
        elif c == '>':
            depth -= 1
        elif c == '(' and depth == 0:
            return name[:i]
    return name


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__.strip().split('\n')[2].strip(), file=sys.stderr)
        return 2
    path, skip, top = args[0], 2, 40
    i = 1
    while i < len(args):
        if args[i] == '--skip' and i + 1 < len(args):
            skip = int(args[i + 1])
            i += 2
        elif args[i] == '--top' and i + 1 < len(args):
            top = int(args[i + 1])
            i += 2
        else:
            print('ktrace.py: unknown argument %s' % args[i], file=sys.stderr)
            return 2
    try:
        with open(path, newline='') as f:
            rows = [r for r in csv.DictReader(f)]
    except OSError as e:
        print('ktrace.py: %s' % e, file=sys.stderr)
        return 1
    ks = []
    for r in rows:
        try:
            ks.append((int(r['start_ns']), int(r['end_ns']), int(r['graph_id']),
                       int(r['graph_node']), r['name']))
        except (KeyError, ValueError):
            continue
    graph = sorted(k for k in ks if k[2] != 0)
    if not graph:
        print('ktrace: no kernels of graph launches in %s (%d kernels in all)' % (path, len(ks)))
        return 1
    # launches: a new one where a (graph, node) comes again
    launches, cur, seen = [], [], set()
    for k in graph:
        key = (k[2], k[3])
        if key in seen:
            launches.append(cur)
            cur, seen = [], set()
        cur.append(k)
        seen.add(key)
    if cur:
        launches.append(cur)
    # the launches of the most common size (the decode step's graph), after the warm-ups
    size = collections.Counter(len(l) for l in launches).most_common(1)[0][0]
    steps = [l for l in launches if len(l) == size][skip:]
    if not steps:
        print('ktrace: %d graph launches of %d kernels, none left after --skip %d' %
              (len([l for l in launches if len(l) == size]), size, skip))
        return 1
    others = sorted(k for k in ks if k[2] == 0)
    names = demangle({k[4] for l in steps for k in l} | {k[4] for k in others})
    charge, dur, cnt = collections.Counter(), collections.Counter(), collections.Counter()
    span_sum = idle_sum = 0
    for l in steps:
        t_end = l[0][0]
        for (s, e, _, _, n) in l:
            nm = short(names[n])
            if s > t_end:
                idle_sum += s - t_end
            charge[nm] += max(0, e - max(s, t_end))
            dur[nm] += e - s
            cnt[nm] += 1
            t_end = max(t_end, e)
        span_sum += t_end - l[0][0]
    ns = len(steps)
    print('ktrace steps=%d kernels_per_step=%d span_us=%.1f idle_us=%.1f busy_us=%.1f' %
          (ns, size, span_sum / ns / 1e3, idle_sum / ns / 1e3, (span_sum - idle_sum) / ns / 1e3))
    print('  %-44s %6s %10s %9s %7s' % ('kernel', 'n/step', 'path_us', 'mean_us', 'share'))
    for nm, c in charge.most_common(top):
        print('  %-44s %6.0f %10.1f %9.2f %6.1f%%' %
              (nm[:44], cnt[nm] / ns, c / ns / 1e3, dur[nm] / cnt[nm] / 1e3,
               100.0 * c / max(1, span_sum)))
    # between a step's graph and the next one's: the kernels outside the graph (the lm_head,
    # sampling, copies) and the time the GPU ran nothing of this program (host work, syncs)
    ocharge, ocnt = collections.Counter(), collections.Counter()
    cyc_sum = gap_idle = n_gaps = 0
    j = 0
    for a, b in zip(steps, steps[1:]):
        g_end, nxt = max(k[1] for k in a), b[0][0]
        if nxt - a[0][0] > 10 * max(1, g_end - a[0][0]):
            continue  # not consecutive (a launch of another size between them)
        n_gaps += 1
        cyc_sum += nxt - a[0][0]
        t_end = g_end
        while j < len(others) and others[j][0] < g_end:
            j += 1
        while j < len(others) and others[j][0] < nxt:
            s0, e0, n = others[j][0], others[j][1], others[j][4]
            if s0 > t_end:
                gap_idle += s0 - t_end
            nm = short(names[n])
            ocharge[nm] += max(0, min(e0, nxt) - max(s0, t_end))
            ocnt[nm] += 1
            t_end = max(t_end, e0)
            j += 1
        gap_idle += max(0, nxt - t_end)
    if n_gaps:
        busy = sum(ocharge.values())
        print('ktrace between_steps=%d cycle_us=%.1f graph_us=%.1f outside_us=%.1f idle_us=%.1f' %
              (n_gaps, cyc_sum / n_gaps / 1e3, span_sum / ns / 1e3, busy / n_gaps / 1e3,
               gap_idle / n_gaps / 1e3))
        for nm, c in ocharge.most_common(8):
            print('  outside %-36s %6.1f %10.1f' % (nm[:36], ocnt[nm] / n_gaps, c / n_gaps / 1e3))
    return 0


if __name__ == '__main__':
    sys.exit(main())
