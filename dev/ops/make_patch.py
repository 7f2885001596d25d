#!/usr/bin/python3
"""Regenerate dev/ops/integrate.patch: CURVE flags + link policy in msg.c and the three services,
and STOPPING=1 in the worker. Copies the CURRENT files of core's modules from SRC into a private
tree, applies anchored edits, and writes `diff -u` against SRC. Fails loudly when an anchor is
gone (core changed the code): then adjust the anchor here, not the patch by hand.

usage: /usr/bin/python3 dev/ops/make_patch.py [SRC=/work/main] [TREE=/tmp/ops-int]
"""
import os
import re
import shutil
import subprocess
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "/work/main"
TREE = sys.argv[2] if len(sys.argv) > 2 else "/tmp/ops-int"

FILES = [
    "common/include/common/msg.h", "common/msg.c",
    "services/scheduler/sched_cfg.h", "services/scheduler/sched_cfg.c",
    "services/scheduler/sched.h", "services/scheduler/sched.c",
    "services/worker/wk_cfg.h", "services/worker/wk_cfg.c", "services/worker/wk.h",
    "services/worker/wk_link.c", "services/worker/main.c",
    "services/gateway/gw_cfg.h", "services/gateway/gw_cfg.c", "services/gateway/gw_sched.h",
    "services/gateway/gw_sched.c", "services/gateway/gw.c",
]


def edit(path, pattern, repl, count=1):
    """Replace `count` matches of regex pattern (DOTALL) in TREE/path; abort if not found."""
    p = os.path.join(TREE, path)
    s = open(p).read()
    new, n = re.subn(pattern, repl, s, count=count, flags=re.S)
    if n != count:
        sys.exit(f"make_patch: anchor not found in {path}: {pattern!r}")
    open(p, "w").write(new)


def main():
    for f in FILES:
        os.makedirs(os.path.dirname(os.path.join(TREE, f)), exist_ok=True)
        shutil.copy(os.path.join(SRC, f), os.path.join(TREE, f))

    # ---- common/msg ----
    edit("common/include/common/msg.h", r"\nenum msg_kind \{", "\nstruct curve_link;\n\nenum msg_kind {")
    edit("common/include/common/msg.h", r"(    bool immediate;[^;]*?\*/\n)",
         r"\1    const struct curve_link *curve; /* CURVE on tcp:// endpoints (common/curve.h);"
         r" NULL = none */\n")
    edit("common/include/common/msg.h",
         r" \* Returns 0, ERR_INVAL \(bad endpoint or descriptor\), or -errno from zmq\. \*/",
         " * With opts->curve, a tcp:// socket becomes a CURVE server (bind) or client (connect).\n"
         " * Returns 0, ERR_INVAL (bad endpoint or descriptor), ERR_STATE (CURVE server without a\n"
         " * running ZAP handler), or -errno from zmq. */")
    edit("common/msg.c", r'#include "common/err.h"\n', '#include "common/curve.h"\n#include "common/err.h"\n')
    edit("common/msg.c", r"(    if \(opts && opts->immediate &&.*?goto fail;\n)(    return 0;\nfail:;)",
         r"""\1    if (opts && opts->curve) {
        int rc = curve_link_apply(opts->curve, s->zsock, endpoint);
        if (rc < 0) {
            zmq_close(s->zsock);
            s->zsock = NULL;
            return rc;
        }
    }
\2""")

    # ---- scheduler: the CURVE server ----
    edit("services/scheduler/sched_cfg.h", r'#include "common/msg.h"\n',
         '#include "common/curve.h"\n#include "common/msg.h"\n')
    edit("services/scheduler/sched_cfg.h", r"struct sched_cfg \{\n",
         "struct sched_cfg {\n    struct curve_link_cfg curve; // --curve-secret, --curve-allow,"
         " --insecure-tcp (common/curve.h)\n")
    edit("services/scheduler/sched_cfg.c", r"(static const struct cfg_opt OPTS\[\] = \{\n)",
         r"\1    CURVE_CFG_OPTS(struct sched_cfg, curve),\n")
    edit("services/scheduler/sched.h", r"(\n    void \*zctx;[^\n]*\n)",
         r"\1    struct curve_link curve; // CURVE keys and the ZAP handler of tcp:// links\n")
    edit("services/scheduler/sched.c",
         r"(int sched_init\(struct sched \*s, const struct sched_cfg \*cfg\)\n\{.*?"
         r"    if \(!s->zctx\)\n        return -errno;\n)"
         r"    int rc = (msg_sock_bind\(&s->gw_sock.*?goto )out_ctx;(.*?return 0;\n)(out_gw:\n.*?)"
         r"(out_ctx:\n)",
         r"""\1    const char *eps[] = {cfg->gateway_endpoint, cfg->worker_endpoint};
    int rc = curve_link_init(&s->curve, &cfg->curve, s->zctx, true, eps, 2); /* ZAP first */
    if (rc < 0)
        goto out_ctx; /* logged there: ev=curve_refused */
    o.curve = &s->curve;
    rc = \2out_curve;\3\4out_curve:
    curve_link_deinit(&s->curve);
\5""")
    edit("services/scheduler/sched.c",
         r"(void sched_deinit\(struct sched \*s\)\n\{.*?msg_sock_close\(&s->gw_sock\);\n)",
         r"\1    curve_link_deinit(&s->curve);\n")

    # ---- worker: a CURVE client, and STOPPING=1 ----
    edit("services/worker/wk_cfg.h", r'#include "common/msg.h"\n',
         '#include "common/curve.h"\n#include "common/msg.h"\n')
    edit("services/worker/wk_cfg.h", r"struct wk_cfg \{\n",
         "struct wk_cfg {\n    struct curve_link_cfg curve; // --curve-secret, --curve-server-pub,"
         " --insecure-tcp\n")
    edit("services/worker/wk_cfg.c", r"(static const struct cfg_opt OPTS\[\] = \{\n)",
         r"\1    CURVE_CFG_OPTS(struct wk_cfg, curve),\n")
    edit("services/worker/wk.h", r"(\n    void \*zctx;[^\n]*\n)",
         r"\1    struct curve_link curve; // CURVE keys of the scheduler link\n")
    edit("services/worker/wk_link.c",
         r"(    w->zctx = msg_context_create\(\);\n    if \(!w->zctx\)\n        return -errno;\n)"
         r"(    struct msg_sock_opts o = \{[^}]*)\};\n    int rc = (msg_sock_connect\(&w->link.*?goto )out_ctx;"
         r"(.*?)(out_ctx:\n)",
         r"""\1    const char *eps[] = {cfg->scheduler_endpoint};
    int rc = curve_link_init(&w->curve, &cfg->curve, w->zctx, false, eps, 1);
    if (rc < 0)
        goto out_ctx; /* logged there: ev=curve_refused */
\2,
                              .curve = &w->curve};
    rc = \3out_curve;\4out_curve:
    curve_link_deinit(&w->curve);
\5""")
    edit("services/worker/wk_link.c",
         r"(void wk_deinit\(struct wk \*w\)\n\{.*?msg_sock_close\(&w->link\);\n)",
         r"\1    curve_link_deinit(&w->curve);\n")
    edit("services/worker/main.c", r'#include "common/log.h"\n',
         '#include "common/log.h"\n#include "common/sdnotify.h"\n')
    edit("services/worker/main.c", r"(    rc = wk_run\(&w, &g_stop\);[^\n]*\n)",
         r"\1    (void)sdnotify_stopping(); /* no-op outside systemd */\n")

    # ---- gateway: a CURVE client ----
    edit("services/gateway/gw_cfg.h", r"#include <stdint.h>\n",
         '#include <stdint.h>\n\n#include "common/curve.h"\n')
    edit("services/gateway/gw_cfg.h", r"struct gw_cfg \{\n",
         "struct gw_cfg {\n    struct curve_link_cfg curve; /* --curve-secret, --curve-server-pub,"
         " --insecure-tcp */\n")
    edit("services/gateway/gw_cfg.c", r"(static const struct cfg_opt opts\[\] = \{\n)",
         r"\1    CURVE_CFG_OPTS(struct gw_cfg, curve),\n")
    edit("services/gateway/gw_sched.h",
         r"/\* Connect \(asynchronously\) to endpoint; dead_ms: silence before the link counts as down\. \*/\n"
         r"struct gw_sched \*gw_sched_create\(uv_loop_t \*loop, const char \*endpoint, int dead_ms\);",
         "struct curve_link_cfg;\n/* Connect (asynchronously) to endpoint; dead_ms: silence before the link counts as down.\n"
         " * curve: the CURVE flags (common/curve.h), may be NULL. */\n"
         "struct gw_sched *gw_sched_create(uv_loop_t *loop, const char *endpoint, int dead_ms,\n"
         "                                 const struct curve_link_cfg *curve);")
    edit("services/gateway/gw_sched.c", r"(struct gw_sched \{\n    uv_loop_t \*loop;\n    void \*zctx;\n)",
         r"\1    struct curve_link curve; /* CURVE keys of the scheduler link */\n")
    edit("services/gateway/gw_sched.c", r'(#include "common/err.h"\n)', r'#include "common/curve.h"\n\1')
    edit("services/gateway/gw_sched.c",
         r"(    struct msg_sock_opts o = \{\.max_bytes = 0, \.hwm = 10000, \.linger_ms = 0)\};",
         r"\1, .curve = &s->curve};")
    edit("services/gateway/gw_sched.c",
         r"struct gw_sched \*gw_sched_create\(uv_loop_t \*loop, const char \*endpoint, int dead_ms\)\n",
         "struct gw_sched *gw_sched_create(uv_loop_t *loop, const char *endpoint, int dead_ms,\n"
         "                                 const struct curve_link_cfg *curve)\n")
    edit("services/gateway/gw_sched.c",
         r"(    s->zctx = msg_context_create\(\);\n    if \(!s->zctx\) \{\n        free\(s\);\n        return NULL;\n    \}\n)"
         r"(    int rc = sock_open\(s\);\n    if \(rc < 0\) \{\n[^}]*?)(        msg_context_destroy\(s->zctx\);)",
         r"""\1    static const struct curve_link_cfg no_curve;
    const char *eps[] = {endpoint};
    if (curve_link_init(&s->curve, curve ? curve : &no_curve, s->zctx, false, eps, 1) < 0) {
        msg_context_destroy(s->zctx); /* logged there: ev=curve_refused */
        free(s);
        return NULL;
    }
\2        curve_link_deinit(&s->curve);
\3""")
    edit("services/gateway/gw_sched.c",
         r"(    if \(s->sock_open\)\n        msg_sock_close\(&s->sock\);\n)(    msg_context_destroy\(s->zctx\);\n    free\(s\);)",
         r"\1    curve_link_deinit(&s->curve);\n\2")
    edit("services/gateway/gw.c",
         r"gw_sched_create\(&gw->loop, cfg->sched_endpoint, cfg->sched_dead_ms\)",
         "gw_sched_create(&gw->loop, cfg->sched_endpoint, cfg->sched_dead_ms,\n"
         "                               &cfg->curve)")

    out = subprocess.run(
        ["bash", "-c", "cd / && for f in " + " ".join(FILES) + "; do "
         f"diff -u --label a/$f --label b/$f {SRC}/$f {TREE}/$f; done"],
        capture_output=True, text=True)
    patch = os.path.join(SRC, "dev/ops/integrate.patch")
    open(patch, "w").write(out.stdout)
    print(f"wrote {patch}: {out.stdout.count(chr(10))} lines")


if __name__ == "__main__":
    main()
