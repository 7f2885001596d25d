#!/usr/bin/python3
"""Reference renderer for the jinja parity tests: Python jinja2 configured like Hugging Face
transformers (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
raise_exception, HF's tojson), with the request normalisation of vLLM's chat_utils
(ConversationMessage fields, content "string"/"openai" format, tool-call arguments parsed,
tools as pydantic model_dump) that text/chat.c implements in C.

usage: ref_render.py OUT.json --templates T1 T2 ... --cases C1 C2 ... [--constructs FILE]
                     [--fuzz N SEED]
Writes {"<case>|<template>": {"ok": bool, "out"|"type"+"msg"}, "construct:<name>": {...,
"vars_json": "...", "template": "..."}} to OUT.json. --fuzz adds N random statement templates
(whitespace control, if/for/set/macro/comment/raw) and N random expressions as constructs
"fuzz:...", generated from SEED so the corpus is the same on every run.
"""
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class GenerationTag(jinja2.ext.Extension):
    """HF's AssistantTracker as far as rendering goes: {% generation %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_support"), [], [], body).set_lineno(lineno)

    def _support(self, caller):
        return caller()


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def _access(node, var, key=None):
    """`var` (or `var.key` / `var['key']`) under any filters, tests and slices."""
    N = jinja2.nodes
    if isinstance(node, (N.Filter, N.Test)):
        return node.node is not None and _access(node.node, var, key)
    if isinstance(node, N.Getitem) and isinstance(node.arg, N.Slice):
        return _access(node.node, var, key)
    if key is None:
        return isinstance(node, N.Name) and node.ctx == "load" and node.name == var
    if isinstance(node, N.Getitem):
        return (_access(node.node, var) and isinstance(node.arg, N.Const)
                and node.arg.value == key)
    if isinstance(node, N.Getattr):
        return _access(node.node, var) and node.attr == key
    return False


def loops_over_message_content(env, src):
    """vLLM's content-format detection: "openai" when a for loop iterates over the content of
    a message variable (a loop target over `messages` or over a name set from it)."""
    N = jinja2.nodes
    try:
        ast = env.parse(src)
        msgs = ["messages"]
        k = 0
        while k < len(msgs):
            for a in ast.find_all(N.Assign):
                if _access(a.node, msgs[k]):
                    if not isinstance(a.target, N.Name):
                        return False
                    if a.target.name not in msgs:
                        msgs.append(a.target.name)
            k += 1
        items = []
        for loop in ast.find_all(N.For):
            if any(_access(loop.iter, v) for v in msgs):
                if not isinstance(loop.target, N.Name):
                    return False
                items.append(loop.target.name)
        for loop in ast.find_all(N.For):
            if any(_access(loop.iter, v, "content") for v in items):
                return isinstance(loop.target, N.Name)
        return False
    except Exception:
        return False


def content_texts(content):
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    texts = []
    for p in content:
        if isinstance(p, str):
            texts.append(p)
            continue
        field = {"text": "text", "input_text": "text", "output_text": "text",
                 "refusal": "refusal", "thinking": "thinking"}.get(p.get("type"))
        if field is None:
            raise ValueError("unsupported content part")
        if p.get(field) is not None:
            texts.append(p[field])
    return texts


def norm_message(m, parts):
    """vLLM chat_utils: the ConversationMessage a template sees."""
    role = m["role"]
    texts = content_texts(m.get("content"))
    out = {"role": role}
    if parts and role != "tool":
        out["content"] = [{"type": "text", "text": t} for t in texts]
    else:
        out["content"] = "\n".join(texts)
    if role == "assistant":
        calls = m.get("tool_calls")
        if isinstance(calls, list) and calls:
            for c in calls:
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict):
                    continue
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        fn["arguments"] = args = json.loads(args)
                    except ValueError:
                        pass
                if not isinstance(args, (dict, list)):
                    fn["arguments"] = {}
            out["tool_calls"] = calls
        r = m.get("reasoning")
        if r is None:
            r = m.get("reasoning_content")
        if r is not None:
            out["reasoning"] = r
            out["reasoning_content"] = r
    elif role == "tool":
        if "tool_call_id" in m:
            out["tool_call_id"] = m["tool_call_id"]
    if isinstance(m.get("name"), str):
        out["name"] = m["name"]
    if role == "developer":
        out["tools"] = m.get("tools")
    return out


def norm_tools(tools):
    """vLLM: [tool.model_dump() for tool in request.tools]."""
    if tools is None:
        return None
    res = []
    for t in tools:
        fn = t["function"]
        nf = {"name": fn["name"], "description": fn.get("description"),
              "parameters": fn.get("parameters")}
        for k, v in fn.items():
            nf.setdefault(k, v)
        nt = {"type": "function", "function": nf}
        for k, v in t.items():
            nt.setdefault(k, v)
        res.append(nt)
    return res


RESERVED = {"messages", "tools", "documents", "add_generation_prompt"}


def render_case(env, src, req):
    parts = loops_over_message_content(env, src)
    messages = [norm_message(m, parts) for m in req["messages"]]
    kwargs = {k: v for k, v in (req.get("chat_template_kwargs") or {}).items()
              if k not in RESERVED}
    return env.from_string(src).render(messages=messages, tools=norm_tools(req.get("tools")),
                                       documents=None,
                                       add_generation_prompt=req.get("add_generation_prompt", True),
                                       **kwargs)


def outcome(fn):
    try:
        return {"ok": True, "out": fn()}
    except Exception as e:  # the C side must fail too
        return {"ok": False, "type": type(e).__name__, "msg": str(e)}


# ---- deterministic random templates (--fuzz) ----

FUZZ_VARS = {"xs": ["a", "b", "c"], "d": {"k": 1, "j": 2}, "t": True, "f": False, "s": "Héllo, wörld",
             "e": "", "w": "  a b\n c  ", "i": 7, "j": -3, "fl": 2.5, "l": [3, 1, 2],
             "ls": ["b", "A", "c"], "nn": None,
             "m": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]}


def fuzz_statement(rnd):
    def ws():
        return rnd.choice(["", " ", "  ", "\n", "\n  ", "  \n", "\t", "\n\n", " \n \n  "])

    def lt():
        return rnd.choice(["{%", "{%-", "{%+"])

    def rt():
        return rnd.choice(["%}", "-%}", "+%}"])

    def var():
        return (rnd.choice(["{{", "{{-"]) + " " + rnd.choice(["s", "t", "v", "ns.c", "loop.index if loop is defined else 0"])
                + " " + rnd.choice(["}}", "-}}"]))

    def block(depth):
        k = rnd.random()
        if depth > 2 or k < 0.25:
            return ws() + rnd.choice(["x", "y z", "", var()]) + ws()
        body = "".join(block(depth + 1) for _ in range(rnd.randint(1, 3)))
        if k < 0.45:
            other = lt() + " else " + rt() + block(depth + 1) if rnd.random() < 0.5 else ""
            return (ws() + lt() + " if " + rnd.choice(["t", "f", "s"]) + " " + rt() + body + ws()
                    + other + lt() + " endif " + rt() + ws())
        if k < 0.65:
            return (ws() + lt() + " for v in " + rnd.choice(["xs", "d", "s"]) + " " + rt() + body
                    + lt() + " endfor " + rt() + ws())
        if k < 0.75:
            return ws() + lt() + " set ns.c = ns.c + 1 " + rt() + ws()
        if k < 0.85:
            return ws() + rnd.choice(["{#", "{#-"]) + " c " + rnd.choice(["#}", "-#}"]) + ws()
        if k < 0.92:
            return (ws() + lt() + " raw " + rnd.choice(["%}", "-%}"]) + ws() + "{{ raw }}" + ws()
                    + lt() + " endraw " + rt() + ws())
        return ws() + rnd.choice(["{{", "{{-"]) + " m() " + rnd.choice(["}}", "-}}"]) + ws()

    return ("{% set ns = namespace(c=0) %}{% macro m() %}" + block(2) + "{% endmacro %}"
            + "".join(block(0) for _ in range(rnd.randint(1, 4))) + rnd.choice(["", "\n", "\n\n"]))


def fuzz_expression(rnd):
    atoms = list(FUZZ_VARS) + ["u", "1", "0", "-1", "2.0", "'x'", "'ab,c'", "''", "none", "true",
                               "[1, 'a']", "{'a': 1}", "(1, 2)"]
    binops = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
    # filters that return generators in jinja2 (select, map, items...) are left out: printing one
    # shows a memory address, which we refuse to do
    filters = ["length", "string", "trim", "upper", "lower", "first", "last", "list", "tojson", "int",
               "float", "abs", "join", "join(', ')", "default('D')", "default('D', true)", "safe",
               "capitalize", "round", "sort", "min", "max", "sum", "count", "replace('l', 'L')",
               "tojson(indent=1)", "indent(2)", "escape", "format(1)"]
    tests = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping",
             "iterable", "sequence", "true", "false", "boolean", "odd", "even", "callable", "lower",
             "upper"]
    methods = ["upper()", "lower()", "strip()", "split()", "split(',')", "startswith('H')",
               "endswith('c')", "replace('l', '')", "find('l')", "count('l')", "get('k')",
               "rstrip('\\n')", "lstrip()", "rsplit(' ', 1)", "splitlines()", "capitalize()"]

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
            return "%s[%s]" % (rnd.choice(["l", "s", "ls", "m"]),
                               rnd.choice(["0", "-1", "5", "'k'", "1:", "::-1", ":2"]))
        if r < 0.95:
            return "(not %s)" % expr(depth + 1)
        return "(%s if %s else %s)" % (expr(depth + 1), expr(depth + 1), expr(depth + 1))

    return "{{ %s }}" % expr()



def main():
    args = sys.argv[1:]
    out_path = args.pop(0)
    templates, cases, constructs, fuzz = [], [], None, None
    mode = None
    while args:
        a = args.pop(0)
        if a in ("--templates", "--cases"):
            mode = a
        elif a == "--constructs":
            constructs = args.pop(0)
        elif a == "--fuzz":
            fuzz = (int(args.pop(0)), int(args.pop(0)))
        elif mode == "--templates":
            templates.append(a)
        elif mode == "--cases":
            cases.append(a)
    env = make_env()
    res = {}
    for t in templates:
        with open(t, encoding="utf-8") as f:
            src = f.read()
        for c in cases:
            with open(c, encoding="utf-8") as f:
                req = json.load(f)
            key = os.path.basename(c) + "|" + os.path.basename(t)
            res[key] = outcome(lambda: render_case(env, src, req))
    if constructs:
        with open(constructs, encoding="utf-8") as f:
            items = json.load(f)
        for it in items:
            tpl = it["template"]
            if isinstance(tpl, list):
                tpl = "".join(tpl)
            vars_ = it.get("vars", {})
            vars_json = json.dumps(vars_, ensure_ascii=False)
            r = outcome(lambda: env.from_string(tpl).render(**json.loads(vars_json)))
            r["vars_json"] = vars_json
            r["template"] = tpl
            res["construct:" + it["name"]] = r
    if fuzz:
        import random
        rnd = random.Random(fuzz[1])
        vars_json = json.dumps(FUZZ_VARS, ensure_ascii=False)
        for k in range(fuzz[0]):
            for kind, make in (("stmt", fuzz_statement), ("expr", fuzz_expression)):
                tpl = make(rnd)
                # a fresh copy each time: jinja2 filters can mutate their input ([...]|indent)
                r = outcome(lambda: env.from_string(tpl).render(**json.loads(vars_json)))
                r["vars_json"] = vars_json
                r["template"] = tpl
                res["construct:fuzz_%s_%d" % (kind, k)] = r
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(res, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
