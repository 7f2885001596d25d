#!/usr/bin/python3
"""Differential fuzz (scratch) of statements and whitespace control: random small templates
(if/for/set/macro/comments/raw with -, + and plain tags, random indentation and newlines),
rendered by jinja2 (HF setup) and by `tern chat-template --vars`. usage: stmtfuzz.py TERN N SEED"""
import json, os, random, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../tests/unit/jinja"))
import ref_render

tern, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
V = {"xs": ["a", "b", "c"], "d": {"k": 1, "j": 2}, "t": True, "f": False, "s": "str"}

def ws():
    return rnd.choice(["", " ", "  ", "\n", "\n  ", "  \n", "\t", "\n\n", " \n \n  "])

def l():
    return rnd.choice(["{%", "{%-", "{%+"])

def r():
    return rnd.choice(["%}", "-%}", "+%}"])

def vl():
    return rnd.choice(["{{", "{{-"])

def vr():
    return rnd.choice(["}}", "-}}"])

def block(depth):
    k = rnd.random()
    if depth > 2 or k < 0.25:
        return ws() + rnd.choice(["x", "y z", "", vl() + " " + rnd.choice(["s", "t", "loop.index if loop is defined else 0", "v", "ns.c"]) + " " + vr()]) + ws()
    body = "".join(block(depth + 1) for _ in range(rnd.randint(1, 3)))
    if k < 0.45:
        return ws() + l() + " if " + rnd.choice(["t", "f", "s"]) + " " + r() + body + ws() + \
            (l() + " else " + r() + block(depth + 1) if rnd.random() < 0.5 else "") + l() + " endif " + r() + ws()
    if k < 0.65:
        return ws() + l() + " for v in " + rnd.choice(["xs", "d", "s"]) + " " + r() + body + l() + " endfor " + r() + ws()
    if k < 0.75:
        return ws() + l() + " set ns.c = ns.c + 1 " + r() + ws()
    if k < 0.85:
        return ws() + rnd.choice(["{#", "{#-"]) + " c " + rnd.choice(["#}", "-#}"]) + ws()
    if k < 0.92:
        return ws() + l() + " raw " + rnd.choice(["%}", "-%}"]) + ws() + "{{ raw }}" + ws() + l() + " endraw " + r() + ws()
    return ws() + vl() + " m() " + vr() + ws()

env = ref_render.make_env()
bad = 0
for i in range(n):
    tpl = "{% set ns = namespace(c=0) %}{% macro m() %}" + block(2) + "{% endmacro %}" + \
          "".join(block(0) for _ in range(rnd.randint(1, 4))) + rnd.choice(["", "\n", "\n\n"])
    try:
        exp, ok = env.from_string(tpl).render(**V), True
    except Exception as e:
        exp, ok = type(e).__name__ + ": " + str(e), False
    with open("/tmp/jj_sf.jinja", "w") as f:
        f.write(tpl)
    p = subprocess.run([tern, "chat-template", "--vars", "--template", "/tmp/jj_sf.jinja"],
                       input=json.dumps(V).encode(), capture_output=True)
    got = p.stdout.decode()
    if (ok and (p.returncode != 0 or got != exp)) or (not ok and p.returncode == 0):
        bad += 1
        print("DIFF", repr(tpl)[:300])
        print("  jinja2:", repr(exp)[:200])
        print("  ours:  ", repr(got)[:200] if p.returncode == 0 else p.stderr.decode()[:200])
print("templates", n, "differences", bad)
