#!/usr/bin/python3
"""Independent float64 numpy reference of the qwen3_5_moe text forward (MODEL.md §3-4), written
from the spec in matrix form (not from the C code). Usage:
  ref_forward.py MODEL_DIR IDS_FILE DUMP.bin [MTP.bin]
compares with the rows of `tern generate --dump-logits` (and `--dump-mtp`); prints the errors and
exits 1 when a relative error exceeds 1e-4 or an argmax differs."""
import json, struct, sys
import numpy as np

def load(d):
    f = open(d + "/model.safetensors", "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n)); base = 8 + n
    raw = open(d + "/model.safetensors", "rb").read()
    t = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        a, b = v["data_offsets"]
        buf = raw[base + a: base + b]
        if v["dtype"] == "F32":
            x = np.frombuffer(buf, np.float32)
        elif v["dtype"] == "BF16":
            x = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit("dtype " + v["dtype"])
        t[k] = x.astype(np.float64).reshape(v["shape"])
    cfg = json.load(open(d + "/config.json"))
    return t, cfg.get("text_config", cfg)

def rms1p(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1 + w)

silu = lambda x: x / (1 + np.exp(-x))
sigm = lambda x: 1 / (1 + np.exp(-x))

def rope(x, pos, R, theta):  # x [T, nh, D]
    half = R // 2
    inv = 1.0 / theta ** (np.arange(0, R, 2) / R)
    ang = pos[:, None] * inv[None, :]
    cos = np.cos(np.concatenate([ang, ang], -1))[:, None, :]
    sin = np.sin(np.concatenate([ang, ang], -1))[:, None, :]
    r = x[..., :R]
    rot = np.concatenate([-r[..., half:], r[..., :half]], -1)
    return np.concatenate([r * cos + rot * sin, x[..., R:]], -1)

def attn(t, p, x, c, pos):
    T = x.shape[0]; D = c["head_dim"]; hq = c["num_attention_heads"]; hkv = c["num_key_value_heads"]
    eps = c["rms_norm_eps"]; rp = c["rope_parameters"]
    R = int(D * rp["partial_rotary_factor"])
    qg = (x @ t[p + "q_proj.weight"].T).reshape(T, hq, 2 * D)
    q, gate = qg[..., :D], qg[..., D:].reshape(T, hq * D)
    k = (x @ t[p + "k_proj.weight"].T).reshape(T, hkv, D)
    v = (x @ t[p + "v_proj.weight"].T).reshape(T, hkv, D)
    q = rope(rms1p(q, t[p + "q_norm.weight"], eps), pos, R, rp["rope_theta"])
    k = rope(rms1p(k, t[p + "k_norm.weight"], eps), pos, R, rp["rope_theta"])
    k = np.repeat(k, hq // hkv, axis=1); v = np.repeat(v, hq // hkv, axis=1)
    s = np.einsum("thd,jhd->htj", q, k) / np.sqrt(D)
    s = s + np.triu(np.full((T, T), -np.inf), 1)[None]
    a = np.exp(s - s.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
    o = np.einsum("htj,jhd->thd", a, v).reshape(T, hq * D) * sigm(gate)
    return o @ t[p + "o_proj.weight"].T

def gdn(t, p, x, c):
    T = x.shape[0]; hk = c["linear_num_key_heads"]; hv = c["linear_num_value_heads"]
    dk = c["linear_key_head_dim"]; dv = c["linear_value_head_dim"]; K = c["linear_conv_kernel_dim"]
    mixed = x @ t[p + "in_proj_qkv.weight"].T
    z = (x @ t[p + "in_proj_z.weight"].T).reshape(T, hv, dv)
    b = x @ t[p + "in_proj_b.weight"].T; a = x @ t[p + "in_proj_a.weight"].T
    w = t[p + "conv1d.weight"][:, 0, :]                    # [C, K]
    xp = np.concatenate([np.zeros((K - 1, mixed.shape[1])), mixed], 0)
    u = sum(w[:, j][None, :] * xp[j:j + T] for j in range(K))
    m = silu(u)
    q = m[:, :hk * dk].reshape(T, hk, dk); k = m[:, hk * dk:2 * hk * dk].reshape(T, hk, dk)
    v = m[:, 2 * hk * dk:].reshape(T, hv, dv)
    q = np.repeat(q, hv // hk, 1); k = np.repeat(k, hv // hk, 1)
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) / np.sqrt(dk)
    k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    beta = sigm(b)
    sp = a + t[p + "dt_bias"]
    sp = np.where(sp > 20, sp, np.log1p(np.exp(np.minimum(sp, 20))))
    g = -np.exp(t[p + "A_log"]) * sp
    S = np.zeros((hv, dk, dv)); o = np.zeros((T, hv, dv))
    for i in range(T):
        S = S * np.exp(g[i])[:, None, None]
        kv = np.einsum("hkv,hk->hv", S, k[i])
        d = beta[i][:, None] * (v[i] - kv)
        S = S + np.einsum("hk,hv->hkv", k[i], d)
        o[i] = np.einsum("hkv,hk->hv", S, q[i])
    n = o / np.sqrt((o * o).mean(-1, keepdims=True) + c["rms_norm_eps"])
    y = (t[p + "norm.weight"] * n * silu(z)).reshape(T, hv * dv)
    return y @ t[p + "out_proj.weight"].T

def moe(t, p, x, c):
    E = c["num_experts"]; k = c["num_experts_per_tok"]; I = c["moe_intermediate_size"]
    lg = x @ t[p + "gate.weight"].T
    pr = np.exp(lg - lg.max(-1, keepdims=True)); pr /= pr.sum(-1, keepdims=True)
    out = np.zeros_like(x)
    gu = t[p + "experts.gate_up_proj"]; dn = t[p + "experts.down_proj"]
    for i in range(x.shape[0]):
        sel = np.argsort(-pr[i], kind="stable")[:k]
        w = pr[i][sel] / pr[i][sel].sum()
        for e, we in sorted(zip(sel, w)):
            h = gu[e] @ x[i]
            out[i] += we * (dn[e] @ (silu(h[:I]) * h[I:]))
    se = p + "shared_expert."
    sh = silu(x @ t[se + "gate_proj.weight"].T) * (x @ t[se + "up_proj.weight"].T)
    sh = sh @ t[se + "down_proj.weight"].T
    return out + sigm(x @ t[p + "shared_expert_gate.weight"].T) * sh

def layer(t, p, h, c, typ, pos):
    eps = c["rms_norm_eps"]
    x = rms1p(h, t[p + "input_layernorm.weight"], eps)
    if typ == "full_attention":
        h = h + attn(t, p + "self_attn.", x, c, pos)
    else:
        h = h + gdn(t, p + "linear_attn.", x, c)
    x = rms1p(h, t[p + "post_attention_layernorm.weight"], eps)
    return h + moe(t, p + "mlp.", x, c)

def forward(t, c, ids):
    P = "model.language_model."
    h = t[P + "embed_tokens.weight"][ids]
    pos = np.arange(len(ids), dtype=np.float64)
    for i, typ in enumerate(c["layer_types"]):
        h = layer(t, P + "layers.%d." % i, h, c, typ, pos)
    hf = rms1p(h, t[P + "norm.weight"], c["rms_norm_eps"])
    return hf @ t["lm_head.weight"].T, hf

def mtp(t, c, toks, hid):
    eps = c["rms_norm_eps"]
    emb = t["model.language_model.embed_tokens.weight"]
    e = rms1p(emb[toks], t["mtp.pre_fc_norm_embedding.weight"], eps)
    hh = rms1p(hid, t["mtp.pre_fc_norm_hidden.weight"], eps)
    x = np.concatenate([e, hh], -1) @ t["mtp.fc.weight"].T
    x = layer(t, "mtp.layers.0.", x, c, "full_attention", np.arange(len(toks), dtype=np.float64))
    y = rms1p(x, t["mtp.norm.weight"], eps)
    return y @ t["lm_head.weight"].T

if __name__ == "__main__":
    t, c = load(sys.argv[1])
    ids = [int(s) for s in open(sys.argv[2]).read().replace(",", " ").split()]
    V = c["vocab_size"]
    got = np.fromfile(sys.argv[3], np.float32).reshape(-1, V)
    ref, hf = forward(t, c, np.array(ids[:got.shape[0]]))
    err = np.abs(got - ref).max() / np.abs(ref).max()
    # tie-aware: the C argmax must be within 1e-5 (relative) of the reference maximum
    pick = ref[np.arange(ref.shape[0]), got.argmax(-1)]
    agree = (pick >= ref.max(-1) - 1e-5 * np.abs(ref).max()).sum()
    print("rows=%d max_rel_err=%.3g argmax_agree=%d/%d" % (got.shape[0], err, agree, got.shape[0]))
    ok = err < 1e-4 and agree == got.shape[0] and got.shape[0] > 0
    if len(sys.argv) > 4:  # MTP dump: row p from (token p+1, hidden p)
        gm = np.fromfile(sys.argv[4], np.float32).reshape(-1, V)
        n = gm.shape[0]
        rm = mtp(t, c, np.array(ids[1:n + 1]), hf[:n])
        em = np.abs(gm - rm).max() / np.abs(rm).max()
        print("mtp rows=%d max_rel_err=%.3g" % (n, em))
        ok = ok and em < 1e-4 and n > 0
    sys.exit(0 if ok else 1)
