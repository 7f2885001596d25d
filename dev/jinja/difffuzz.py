#!/usr/bin/python3
"""Differential fuzz (scratch): mutate a real template, render with jinja2 (HF setup from
tests/unit/jinja/ref_render.py) and with `tern chat-template --vars`; report differences.
usage: difffuzz.py TERN_BIN TEMPLATE CASE N"""
import json, random, subprocess, sys, tempfile, os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../tests/unit/jinja"))
import ref_render

tern, tpl_path, case_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
src = open(tpl_path).read()
req = json.load(open(case_path))
env = ref_render.make_env()
parts = ref_render.loops_over_message_content(env, src)
vars_ = {"messages": [ref_render.norm_message(m, parts) for m in req["messages"]],
         "tools": ref_render.norm_tools(req.get("tools")), "documents": None,
         "add_generation_prompt": True}
vars_json = json.dumps(vars_, ensure_ascii=False)
pool = "{}%#-+|.,:()[]'\"\\ \nabcxyz0123~*/<>=!"
random.seed(7)
bad = 0
for i in range(n):
    s = list(src)
    for _ in range(random.randint(1, 3)):
        s[random.randrange(len(s))] = random.choice(pool)
    s = "".join(s)
    try:
        exp = env.from_string(s).render(**vars_)
        ok = True
    except Exception as e:
        ok, exp = False, type(e).__name__ + ": " + str(e)
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(s)
    p = subprocess.run([tern, "chat-template", "--vars", "--template", f.name],
                       input=vars_json.encode(), capture_output=True)
    os.unlink(f.name)
    got = p.stdout.decode("utf-8", "replace")
    if ok and (p.returncode != 0 or got != exp):
        bad += 1
        print("DIFF (jinja2 ok)", i, p.stderr.decode()[:200])
        open("/tmp/jdiff_%d.jinja" % i, "w").write(s)
    elif not ok and p.returncode == 0:
        bad += 1
        print("DIFF (jinja2 failed: %s) we rendered" % exp[:150], i)
        open("/tmp/jdiff_%d.jinja" % i, "w").write(s)
print("iterations", n, "differences", bad)
