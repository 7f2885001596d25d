#!/usr/bin/python3
"""Reference renderer for the jinja parity tests: Python jinja2 configured like Hugging Face
transformers (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
raise_exception, HF's tojson), with the request normalisation of vLLM's chat_utils
(ConversationMessage fields, content "string"/"openai" format, tool-call arguments parsed,
tools as pydantic model_dump) that text/chat.c implements in C.

usage: ref_render.py OUT.json --templates T1 T2 ... --cases C1 C2 ... [--constructs FILE]
Writes {"<case>|<template>": {"ok": bool, "out"|"type"+"msg"}, "construct:<name>": {...,
"vars_json": "..."}} to OUT.json.
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


def iterates_over_content(env, src):
    for node in env.parse(src).find_all(jinja2.nodes.For):
        it = node.iter
        if isinstance(it, jinja2.nodes.Name) and it.name == "content":
            return True
        if isinstance(it, jinja2.nodes.Getattr) and it.attr == "content":
            return True
        if (isinstance(it, jinja2.nodes.Getitem) and isinstance(it.arg, jinja2.nodes.Const)
                and it.arg.value == "content"):
            return True
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
        if p.get("type") not in ("text", "input_text", "output_text"):
            raise ValueError("unsupported content part")
        if p.get("text") is not None:
            texts.append(p["text"])
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
    parts = iterates_over_content(env, src)
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


def main():
    args = sys.argv[1:]
    out_path = args.pop(0)
    templates, cases, constructs = [], [], None
    mode = None
    while args:
        a = args.pop(0)
        if a in ("--templates", "--cases"):
            mode = a
        elif a == "--constructs":
            constructs = args.pop(0)
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
            r = outcome(lambda: env.from_string(tpl).render(**vars_))
            r["vars_json"] = json.dumps(vars_, ensure_ascii=False)
            r["template"] = tpl
            res["construct:" + it["name"]] = r
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(res, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
