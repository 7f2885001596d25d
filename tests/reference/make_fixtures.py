#!/usr/bin/env python3
"""Build reference fixtures for tern's CPU forward pass with Hugging Face transformers.

Run on a machine with torch and transformers (5.17 was used):
    PYTHONUNBUFFERED=1 python3 tests/reference/make_fixtures.py --out OUTDIR [--quant-dir DIR]

Fixture kinds:
  hf_*   : tiny random qwen3_5_moe text models built by transformers itself (fp32, eager
           attention and experts), every norm / A_log / dt_bias / conv weight randomized, saved with
           save_pretrained (default per-expert names, or save_original_format=False fused names),
           plus an MTP head built from transformers modules (MODEL.md §6.7) whose weights are added
           to the safetensors file as mtp.*.
  q_*    : checkpoints written by `tern make-tiny-model` (carried in --quant-dir), dequantized here
           by stfile.py (an independent numpy implementation of the formats), loaded into the
           transformers model; for W4A4 every quantized Linear (and expert) fake-quantizes its
           input as CHECKPOINTS.md §1.5 says.
Each fixture directory holds the checkpoint and ref.json + raw little-endian float32 files:
  prefill.f32 (n_prompt, V) logits, decode.f32 (n_decode, V) logits of greedy decode steps,
  mtp.f32 (n_prompt, V) MTP logits of the prefill positions (tokens shifted by one).
All logits are computed on the CPU in float32.
"""
import argparse
import copy
import json
import os
import shutil
import sys
import traceback

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

import transformers  # noqa: E402
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as M  # noqa: E402
from transformers.models.qwen3_5_moe import configuration_qwen3_5_moe as C  # noqa: E402

torch.set_grad_enabled(False)
torch.set_num_threads(min(8, os.cpu_count() or 1))
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_float32_matmul_precision("highest")

N_DECODE = 4
N_CONT = 6


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------------------------
# model construction


def mrope_section(rot):
    half = rot // 2
    h, w = (half + 1) // 3, half // 3
    return [half - h - w, h, w]


def make_config(spec):
    pattern = spec["layers"]
    rot = int(spec["head_dim"] * 0.25)
    kw = dict(
        vocab_size=spec["vocab"], hidden_size=spec["hidden"], num_hidden_layers=len(pattern),
        layer_types=["full_attention" if c == "F" else "linear_attention" for c in pattern],
        num_attention_heads=spec["heads"], num_key_value_heads=spec["kv_heads"],
        head_dim=spec["head_dim"], linear_num_key_heads=spec["lin_k_heads"],
        linear_num_value_heads=spec["lin_v_heads"], linear_key_head_dim=spec["lin_k_dim"],
        linear_value_head_dim=spec["lin_v_dim"], linear_conv_kernel_dim=spec.get("conv", 4),
        num_experts=spec["experts"], num_experts_per_tok=spec["top_k"],
        moe_intermediate_size=spec["inter"], shared_expert_intermediate_size=spec["shared_inter"],
        rms_norm_eps=spec.get("eps", 1e-6), max_position_embeddings=4096,
        tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": float(spec["theta"]),
                         "partial_rotary_factor": 0.25, "mrope_section": mrope_section(rot),
                         "mrope_interleaved": True},
    )
    try:
        cfg = C.Qwen3_5MoeTextConfig(**kw)
    except Exception as e:  # older/newer signature: retry without the extras
        log("config: retry without mrope keys:", repr(e))
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": float(spec["theta"]),
                                 "partial_rotary_factor": 0.25}
        cfg = C.Qwen3_5MoeTextConfig(**kw)
    assert list(cfg.layer_types) == kw["layer_types"], cfg.layer_types
    for k in ("_attn_implementation", "_experts_implementation"):
        try:
            setattr(cfg, k, "eager")
        except Exception as e:
            log("cannot set", k, repr(e))
    return cfg


def build_causal_lm(cfg):
    cls = M.Qwen3_5MoeForCausalLM
    model = None
    for kwargs in ({"attn_implementation": "eager", "experts_implementation": "eager"},
                   {"attn_implementation": "eager"}):
        try:
            model = cls._from_config(cfg, **kwargs)
            log("built with", kwargs)
            break
        except Exception as e:
            log("_from_config", kwargs, "failed:", repr(e))
    if model is None:
        model = cls(cfg)
    model = model.float().eval()
    log("attn impl:", getattr(model.config, "_attn_implementation", None),
        "experts impl:", getattr(model.config, "_experts_implementation", None))
    return model


def randomize(model, seed, std=0.05):
    g = torch.Generator().manual_seed(seed)

    def normal(shape, mean, s):
        return torch.randn(shape, generator=g, dtype=torch.float32) * s + mean

    for name, p in sorted(model.named_parameters()):
        if name.endswith("A_log"):
            v = torch.log(torch.rand(p.shape, generator=g) * 15.0 + 1.0)
        elif name.endswith("dt_bias"):
            v = normal(p.shape, 0.5, 0.5)
        elif name.endswith("conv1d.weight"):
            v = normal(p.shape, 0.0, 0.3)
        elif name.endswith("linear_attn.norm.weight"):
            v = normal(p.shape, 1.0, 0.1)
        elif "norm" in name:
            v = normal(p.shape, 0.0, 0.1)
        elif "embed_tokens" in name:
            v = normal(p.shape, 0.0, 0.5)
        elif name.startswith("lm_head"):
            v = normal(p.shape, 0.0, 0.1)
        else:
            v = normal(p.shape, 0.0, std)
        p.copy_(v)


class MTPHead(torch.nn.Module):
    """MODEL.md §6.1/6.7: e = RMSNorm1p(embed(tok)), hh = RMSNorm1p(hid); x = fc([e | hh]);
    one full-attention decoder layer; RMSNorm1p(mtp.norm); shared lm_head."""

    def __init__(self, cfg):
        super().__init__()
        H, eps = cfg.hidden_size, cfg.rms_norm_eps
        mcfg = copy.deepcopy(cfg)
        mcfg.num_hidden_layers = 1
        mcfg.layer_types = ["full_attention"]
        try:
            mcfg._attn_implementation = "eager"
        except Exception:
            pass
        self.pre_fc_norm_embedding = M.Qwen3_5MoeRMSNorm(H, eps=eps)
        self.pre_fc_norm_hidden = M.Qwen3_5MoeRMSNorm(H, eps=eps)
        self.fc = torch.nn.Linear(2 * H, H, bias=False)
        self.layers = torch.nn.ModuleList([M.Qwen3_5MoeDecoderLayer(mcfg, 0)])
        self.norm = M.Qwen3_5MoeRMSNorm(H, eps=eps)

    def forward(self, lm, tokens, hidden, positions):
        emb = lm.model.embed_tokens(tokens)
        x = self.fc(torch.cat([self.pre_fc_norm_embedding(emb), self.pre_fc_norm_hidden(hidden)], -1))
        T = tokens.shape[1]
        pos = positions.view(1, 1, -1).expand(3, 1, -1)
        try:
            cos, sin = lm.model.rotary_emb(x, pos)
        except Exception as e:
            log("rotary with 3-row ids failed, trying 2-D:", repr(e))
            cos, sin = lm.model.rotary_emb(x, positions.view(1, -1))
        mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1).view(1, 1, T, T)
        y = self.layers[0](x, position_embeddings=(cos, sin), attention_mask=mask,
                           position_ids=positions.view(1, -1), past_key_values=None)
        if isinstance(y, tuple):
            y = y[0]
        y = self.norm(y)
        return lm.lm_head(y), y


# ---------------------------------------------------------------------------------------------
# W4A4 activation emulation (CHECKPOINTS.md §1.5), torch, independent of the C code


def e2m1_round(x):
    a = x.abs()
    q = torch.zeros_like(a)
    q = torch.where(a > 0.25, torch.full_like(a, 0.5), q)
    q = torch.where(a >= 0.75, torch.full_like(a, 1.0), q)
    q = torch.where(a > 1.25, torch.full_like(a, 1.5), q)
    q = torch.where(a >= 1.75, torch.full_like(a, 2.0), q)
    q = torch.where(a > 2.5, torch.full_like(a, 3.0), q)
    q = torch.where(a >= 3.5, torch.full_like(a, 4.0), q)
    q = torch.where(a > 5.0, torch.full_like(a, 6.0), q)
    return torch.where(x < 0, -q, q)


def nvfp4_act_fake_quant(x, g_in):
    shp = x.shape
    g = torch.tensor(g_in, dtype=torch.float32)
    xs = x.float().reshape(-1, shp[-1] // 16, 16)
    amax = xs.abs().amax(-1, keepdim=True)
    sv = torch.clamp(g * amax / 6.0, -448.0, 448.0)
    s = sv.to(torch.float8_e4m3fn).to(torch.float32)
    r = torch.where(s == 0, torch.zeros_like(s), g / s)
    q = e2m1_round(torch.clamp(xs * r, -6.0, 6.0))
    out = torch.where(s == 0, torch.zeros_like(q), q * s / g)
    return out.reshape(shp).to(x.dtype)


def patch_w4a4(lm, gins, mtp=None):
    """Every Linear with an input global scale fake-quantizes its input; experts too."""
    n_lin = n_exp = 0
    mods = dict(lm.named_modules())
    for name, g_in in gins.items():
        if ".mlp.experts." in name:
            continue
        mod = mods.get(name)
        if mod is None:
            raise KeyError(f"W4A4 module {name} not in the model")

        def fwd(x, _m=mod, _g=g_in):
            return F.linear(nvfp4_act_fake_quant(x, _g), _m.weight)
        mod.forward = fwd
        n_lin += 1
    for name, mod in mods.items():
        if not isinstance(mod, M.Qwen3_5MoeExperts):
            continue
        key = name  # e.g. model.layers.3.mlp.experts
        g_gu = [gins.get(f"{key}.{e}.gate_up") for e in range(mod.num_experts)]
        g_dn = [gins.get(f"{key}.{e}.down") for e in range(mod.num_experts)]
        if g_gu[0] is None:
            continue

        def efwd(hidden_states, top_k_index, top_k_weights, _m=mod, _ggu=g_gu, _gdn=g_dn):
            # the eager loop of Qwen3_5MoeExperts, with activation fake-quant per expert
            final = torch.zeros_like(hidden_states)
            for e in range(_m.num_experts):
                tok, top_pos = torch.where(top_k_index == e)
                if tok.numel() == 0:
                    continue
                cur = hidden_states[tok]
                gate, up = F.linear(nvfp4_act_fake_quant(cur, _ggu[e]), _m.gate_up_proj[e]).chunk(2, dim=-1)
                h = _m.act_fn(gate) * up
                h = F.linear(nvfp4_act_fake_quant(h, _gdn[e]), _m.down_proj[e])
                h = h * top_k_weights[tok, top_pos, None]
                final.index_add_(0, tok, h.to(final.dtype))
            return final
        mod.forward = efwd
        n_exp += 1
    log(f"W4A4: patched {n_lin} linears and {n_exp} expert blocks")
    return n_lin, n_exp


# ---------------------------------------------------------------------------------------------
# references


def run_reference(lm, mtp, prompt):
    ids = torch.tensor([prompt], dtype=torch.long)
    out = lm(input_ids=ids, use_cache=True, output_hidden_states=False)
    prefill = out.logits[0].float()
    # the final-normed hidden states: the base model output (post model.norm)
    hidden = lm.model(input_ids=ids).last_hidden_state
    chk = lm.lm_head(hidden)[0]
    assert torch.allclose(chk, prefill, atol=1e-5, rtol=1e-5), "hidden/logits mismatch"
    # greedy decode with the cache (GDN recurrent path), fallback: full recompute
    dec_tokens, dec_logits, path = [], [], "cache"
    nxt = int(prefill[-1].argmax())
    pkv = out.past_key_values
    seq = list(prompt)
    for _ in range(N_DECODE):
        dec_tokens.append(nxt)
        seq.append(nxt)
        try:
            o = lm(input_ids=torch.tensor([[nxt]]), past_key_values=pkv, use_cache=True)
            pkv = o.past_key_values
            lg = o.logits[0, -1].float()
        except Exception as e:
            log("cached decode failed, recomputing:", repr(e))
            path = "recompute"
            lg = lm(input_ids=torch.tensor([seq])).logits[0, -1].float()
        dec_logits.append(lg)
        nxt = int(lg.argmax())
    # cross-check the cached decode against a full recompute of the whole sequence
    full = lm(input_ids=torch.tensor([seq])).logits[0].float()
    dec = torch.stack(dec_logits)
    dev = float((full[len(prompt):] - dec).abs().max() / full.abs().max())
    log(f"decode path={path} cache-vs-recompute rel dev={dev:.3g}")
    res = {"prefill": prefill, "decode": dec, "decode_tokens": dec_tokens, "decode_path": path,
           "decode_cache_dev": dev}
    # a multi-token continuation on the cached state (GDN chunked path with an initial state)
    cont = [int(t) for t in np.random.default_rng(len(prompt)).integers(0, prefill.shape[-1], N_CONT)]
    cl, cpath = None, "recompute"
    if path == "cache":
        try:
            o = lm(input_ids=torch.tensor([cont]), past_key_values=pkv, use_cache=True)
            cl, cpath = o.logits[0].float(), "cache"
        except Exception as e:
            log("cached continuation failed, recomputing:", repr(e))
    full = lm(input_ids=torch.tensor([seq + cont])).logits[0, -N_CONT:].float()
    if cl is None:
        cl = full
    cdev = float((full - cl).abs().max() / full.abs().max())
    log(f"continuation path={cpath} cache-vs-recompute rel dev={cdev:.3g}")
    res.update({"cont": cl, "cont_tokens": cont, "cont_path": cpath, "cont_cache_dev": cdev})
    if mtp is not None:
        n = len(prompt)
        first = int(prefill[-1].argmax())
        mtp_tokens = list(prompt[1:]) + [first]
        lg, y = mtp(lm, torch.tensor([mtp_tokens]), hidden, torch.arange(n))
        res["mtp"] = lg[0].float()
        res["mtp_tokens"] = mtp_tokens
        # draft step 2 (MODEL.md §6.3): tok = d1, hid = y1 (post mtp.norm), position n
        d1 = int(lg[0, -1].argmax())
        lg2, _ = mtp(lm, torch.tensor([mtp_tokens + [d1]]), torch.cat([hidden, y[:, -1:, :]], 1),
                     torch.arange(n + 1))
        mdev = float((lg2[0, :n] - lg[0]).abs().max() / lg[0].abs().max())
        log(f"mtp step-2 run: causal prefix rel dev={mdev:.3g}")
        res["mtp2"] = lg2[0, -1:].float()
        res["mtp2_token"] = d1
    return res


def write_ref(d, name, kind, prompt, res, tol, extra):
    def save(key):
        a = res[key].detach().cpu().numpy().astype("<f4")
        a.tofile(os.path.join(d, key + ".f32"))
        return {"file": key + ".f32", "shape": list(a.shape)}
    ref = {"name": name, "kind": kind, "prompt": prompt, "prefill": save("prefill"),
           "decode_tokens": res["decode_tokens"], "decode": save("decode"),
           "decode_path": res["decode_path"], "decode_cache_dev": res["decode_cache_dev"],
           "rel_tol": tol,
           "rel_err_formula": "max_t max_v |ours[t][v] - ref[t][v]| / max_v |ref[t][v]|"}
    ref["cont"] = save("cont")
    for k in ("cont_tokens", "cont_path", "cont_cache_dev"):
        ref[k] = res[k]
    if "mtp" in res:
        ref["mtp"] = save("mtp")
        ref["mtp_tokens"] = res["mtp_tokens"]
        ref["mtp2"] = save("mtp2")
        ref["mtp2_token"] = res["mtp2_token"]
    ref.update(extra)
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)


def st_names(d):
    hdr, _ = stfile.read_header(os.path.join(d, "model.safetensors"))
    hdr.pop("__metadata__", None)
    return sorted(hdr)


def add_mtp_tensors(d, mtp):
    from safetensors.torch import load_file, save_file
    p = os.path.join(d, "model.safetensors")
    sd = load_file(p)
    for k, v in mtp.state_dict().items():
        sd["mtp." + k] = v.detach().contiguous().clone()
    save_file(sd, p, metadata={"format": "pt"})
    cp = os.path.join(d, "config.json")
    with open(cp) as f:
        cfg = json.load(f)
    cfg["mtp_num_hidden_layers"] = 1
    cfg["mamba_ssm_dtype"] = "float32"
    with open(cp, "w") as f:
        json.dump(cfg, f, indent=2)


HF_SPECS = [
    # name, spec, save_original_format, prompt length, with MTP
    ("hf_a", dict(layers="LLLF", vocab=256, hidden=32, heads=4, kv_heads=2, head_dim=16,
                  lin_k_heads=2, lin_v_heads=4, lin_k_dim=8, lin_v_dim=8, experts=8, top_k=2,
                  inter=16, shared_inter=24, theta=1e7), True, 20, True),
    ("hf_b", dict(layers="LFLLF", vocab=256, hidden=40, heads=6, kv_heads=2, head_dim=16,
                  lin_k_heads=2, lin_v_heads=6, lin_k_dim=8, lin_v_dim=12, experts=6, top_k=3,
                  inter=24, shared_inter=16, theta=1e4), False, 19, True),
    ("hf_c", dict(layers="FL", vocab=256, hidden=48, heads=4, kv_heads=4, head_dim=16,
                  lin_k_heads=4, lin_v_heads=4, lin_k_dim=12, lin_v_dim=12, experts=4, top_k=1,
                  inter=32, shared_inter=32, theta=1e6), True, 70, False),
]


def make_hf_fixture(out, name, spec, original, n_prompt, with_mtp, seed):
    log(f"== {name}")
    cfg = make_config(spec)
    lm = build_causal_lm(cfg)
    randomize(lm, seed)
    mtp = None
    if with_mtp:
        mtp = MTPHead(lm.config).float().eval()
        randomize(mtp, seed + 1000)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    try:
        lm.save_pretrained(d, save_original_format=original)
        saved = f"save_original_format={original}"
    except TypeError as e:
        log("save_original_format not accepted:", repr(e))
        lm.save_pretrained(d)
        saved = "default"
    names = st_names(d)
    log("saved", saved, len(names), "tensors; sample:", [n for n in names if "experts" in n][:3])
    if with_mtp:
        add_mtp_tensors(d, mtp)
    rng = np.random.default_rng(seed)
    prompt = [int(t) for t in rng.integers(0, spec["vocab"], n_prompt)]
    res = run_reference(lm, mtp, prompt)
    write_ref(d, name, "fp32", prompt, res, 1e-4,
              {"saved": saved, "expert_layout": "per-expert" if any(".experts.0." in n for n in names) else "fused",
               "n_tensors": len(st_names(d))})


def load_into(lm, dense, strict_names=True):
    sd = lm.state_dict()
    missing = [k for k in sd if k not in dense]
    extra = [k for k in dense if k not in sd and not k.startswith("mtp.")]
    if missing or extra:
        raise KeyError(f"missing={missing[:5]} extra={extra[:5]}")
    for k in sd:
        sd[k].copy_(torch.from_numpy(dense[k]).reshape(sd[k].shape))


def spec_from_config(tc):
    lt = tc["layer_types"]
    return dict(layers="".join("F" if t == "full_attention" else "L" for t in lt),
                vocab=tc["vocab_size"], hidden=tc["hidden_size"], heads=tc["num_attention_heads"],
                kv_heads=tc["num_key_value_heads"], head_dim=tc["head_dim"],
                lin_k_heads=tc["linear_num_key_heads"], lin_v_heads=tc["linear_num_value_heads"],
                lin_k_dim=tc["linear_key_head_dim"], lin_v_dim=tc["linear_value_head_dim"],
                conv=tc["linear_conv_kernel_dim"], experts=tc["num_experts"],
                top_k=tc["num_experts_per_tok"], inter=tc["moe_intermediate_size"],
                shared_inter=tc["shared_expert_intermediate_size"],
                theta=tc["rope_parameters"]["rope_theta"], eps=tc["rms_norm_eps"])


def make_quant_fixture(out, src, name, seed):
    log(f"== {name} from {src}")
    ck = stfile.Checkpoint(src)
    tc = stfile.text_config(ck.config)
    dense, gins, fmt, w4a4 = stfile.load_dense(ck)
    log("format", fmt, "w4a4", w4a4, "input scales", len(gins))
    cfg = make_config(spec_from_config(tc))
    lm = build_causal_lm(cfg)
    load_into(lm, dense)
    mtp = None
    if any(k.startswith("mtp.") for k in dense):
        mtp = MTPHead(lm.config).float().eval()
        msd = mtp.state_dict()
        for k in msd:
            msd[k].copy_(torch.from_numpy(dense["mtp." + k]).reshape(msd[k].shape))
    if w4a4:
        patch_w4a4(lm, gins)
    d = os.path.join(out, name)
    shutil.copytree(src, d, dirs_exist_ok=True)
    rng = np.random.default_rng(seed)
    prompt = [int(t) for t in rng.integers(0, tc["vocab_size"], 20)]
    res = run_reference(lm, mtp, prompt)
    tol = 2e-3 if w4a4 else 1e-4
    write_ref(d, name, fmt + ("-w4a4" if w4a4 else ""), prompt, res, tol,
              {"w4a4": w4a4, "note": "weights dequantized by stfile.py; W4A4 inputs fake-quantized"
               if w4a4 else "weights dequantized by stfile.py"})
    return lm, cfg


def try_autoload(src, cfg):
    """Informative: transformers' own loader on our checkpoint (model.language_model.* names,
    fused experts) into Qwen3_5MoeForCausalLM with the same text config."""
    try:
        lm = M.Qwen3_5MoeForCausalLM.from_pretrained(src, config=cfg)
        lm = lm.float().eval()
        log("from_pretrained loaded", src, type(lm).__name__)
        return lm
    except Exception as e:
        log("from_pretrained could not load", src, ":", repr(e)[:300])
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quant-dir", default=None, help="folder of tern make-tiny-model outputs")
    a = ap.parse_args()
    log("python", sys.version.split()[0], "torch", torch.__version__, "transformers",
        transformers.__version__)
    log("modeling:", M.__file__)
    log("fla available:", getattr(transformers.utils, "is_flash_linear_attention_available", lambda: "?")())
    os.makedirs(a.out, exist_ok=True)
    made, failed = [], []
    for i, (name, spec, original, n_prompt, with_mtp) in enumerate(HF_SPECS):
        try:
            make_hf_fixture(a.out, name, spec, original, n_prompt, with_mtp, 100 + i)
            made.append(name)
        except Exception:
            traceback.print_exc()
            failed.append(name)
    if a.quant_dir:
        for i, sub in enumerate(sorted(os.listdir(a.quant_dir))):
            src = os.path.join(a.quant_dir, sub)
            if not os.path.isdir(src):
                continue
            try:
                lm, cfg = make_quant_fixture(a.out, src, sub, 200 + i)
                made.append(sub)
                if sub == "q_bf16":
                    auto = try_autoload(src, cfg)
                    if auto is not None:
                        ids = torch.tensor([[1, 2, 3, 4, 5]])
                        dev = float((auto(input_ids=ids).logits - lm(input_ids=ids).logits).abs().max())
                        log("autoload vs manual load max abs logit diff:", dev)
            except Exception:
                traceback.print_exc()
                failed.append(sub)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump({"fixtures": made, "failed": failed, "torch": torch.__version__,
                   "transformers": transformers.__version__}, f, indent=1)
    log("made", made, "failed", failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
