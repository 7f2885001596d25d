#!/usr/bin/python3
"""Differential fuzz (scratch) of expressions: random jinja expressions over fixed variables,
rendered by jinja2 (HF setup) and by `tern chat-template --vars`, one process per expression.
usage: exprfuzz.py TERN N SEED"""
import json, random, subprocess, sys, os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../tests/unit/jinja"))
import ref_render

tern, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
V = {"i": 7, "j": -3, "z": 0, "f": 2.5, "g": -0.125, "s": "Héllo, wörld 😀", "e": "", "w": "  a b\n c  ",
     "l": [3, 1, 2], "ls": ["b", "A", "c"], "d": {"k": "v", "n": 2, "l": [1, {"x": None}]},
     "nn": None, "t": True, "fa": False, "m": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]}
atoms = list(V) + ["u", "1", "0", "-1", "2.0", "'x'", "'ab,c'", "''", "none", "true", "false", "[1, 'a']", "{'a': 1}", "(1, 2)"]
binops = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
filters = ["length", "string", "trim", "upper", "lower", "first", "last", "list", "tojson", "int", "float",
           "abs", "reverse", "join", "join(', ')", "default('D')", "default('D', true)", "safe", "items",
           "capitalize", "round", "sort", "unique", "min", "max", "sum", "count", "replace('l', 'L')",
           "select", "reject", "map('string')", "tojson(indent=1)", "indent(2)", "escape"]
tests = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable",
         "sequence", "true", "false", "boolean", "odd", "even", "callable", "lower", "upper"]
methods = ["upper()", "lower()", "strip()", "split()", "split(',')", "startswith('H')", "endswith('c')",
           "replace('l', '')", "find('l')", "count('l')", "items()", "keys()", "get('k')", "rstrip('\\n')",
           "lstrip()", "rsplit(' ', 1)", "splitlines()", "capitalize()"]

def expr(depth=0):
    r = rnd.random()
    if depth > 3 or r < 0.3:
        return rnd.choice(atoms)
    if r < 0.5:
        return "(%s %s %s)" % (expr(depth + 1), rnd.choice(binops), expr(depth + 1))
    if r < 0.65:
        return "(%s|%s)" % (expr(depth + 1), rnd.choice(filters))
    if r < 0.75:
        return "(%s is %s%s)" % (expr(depth + 1), rnd.choice(["", "not "]), rnd.choice(tests))
    if r < 0.85:
        return "%s.%s" % (rnd.choice(["s", "w", "d", "e", "'a,b'"]), rnd.choice(methods))
    if r < 0.9:
        return "%s[%s]" % (rnd.choice(["l", "s", "d", "ls", "m"]), rnd.choice(["0", "-1", "5", "'k'", "1:", "::-1", ":2"]))
    if r < 0.95:
        return "(not %s)" % expr(depth + 1)
    return "(%s if %s else %s)" % (expr(depth + 1), expr(depth + 1), expr(depth + 1))

env = ref_render.make_env()
bad = 0
exprs = [expr() for _ in range(n)]
for k, e in enumerate(exprs):
    tpl = "{{ %s }}" % e
    try:
        exp = env.from_string(tpl).render(**V)
        ok = True
    except Exception as ex:
        ok, exp = False, type(ex).__name__ + ": " + str(ex)
    with open("/tmp/jj_ef.jinja", "w") as f:
        f.write(tpl)
    p = subprocess.run([tern, "chat-template", "--vars", "--template", "/tmp/jj_ef.jinja"],
                       input=json.dumps(V).encode(), capture_output=True)
    got = p.stdout.decode("utf-8", "replace")
    if ok and (p.returncode != 0 or got != exp):
        bad += 1
        print("DIFF", tpl, "| jinja2:", repr(exp)[:120], "| ours:", repr(got)[:120] if p.returncode == 0 else p.stderr.decode().strip()[:160])
    elif not ok and p.returncode == 0:
        bad += 1
        print("DIFF", tpl, "| jinja2 failed:", exp[:120], "| ours:", repr(got)[:120])
print("expressions", n, "differences", bad)
