"""Minimal safetensors reader and checkpoint dequantizer, numpy only.

Written from the format descriptions (safetensors header layout; CHECKPOINTS.md §1.3-1.6 for
NVFP4 in compressed-tensors and ModelOpt naming; FP8 e4m3 with per-tensor / per-channel /
block scales) as an implementation independent of the C loader and packer. Used by
make_fixtures.py (on the GPU machine) and by check_tiny.py (here).
"""
import json
import os
import struct

import numpy as np

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def e4m3_to_f32(u8):
    """float8_e4m3fn bytes -> float32 (bias 7, no inf, 0x7f/0xff = NaN)."""
    u = u8.astype(np.int32)
    sign = np.where(u & 0x80, -1.0, 1.0)
    exp = (u >> 3) & 0xF
    man = (u & 7).astype(np.float64)
    val = np.where(exp == 0, man * 2.0 ** -9, (8.0 + man) * 2.0 ** (exp.astype(np.float64) - 10))
    val = np.where((exp == 0xF) & ((u & 7) == 7), np.nan, val)
    return (sign * val).astype(np.float32)


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    return hdr, 8 + n


class Checkpoint:
    """All tensors of a checkpoint directory (single file or index + shards), as raw arrays."""

    def __init__(self, d):
        self.dir = d
        self.meta = {}
        idx = os.path.join(d, "model.safetensors.index.json")
        files = []
        if os.path.exists(idx):
            with open(idx) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        self.t = {}
        for fn in files:
            p = os.path.join(d, fn)
            hdr, base = read_header(p)
            self.meta.update(hdr.pop("__metadata__", {}) or {})
            raw = np.fromfile(p, dtype=np.uint8)
            ends = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in hdr.items())
            pos = 0
            for s, e, k in ends:  # offsets must be contiguous (safetensors rule)
                assert s == pos, f"{p}: gap before {k}"
                pos = e
            assert base + pos == raw.size, f"{p}: trailing bytes"
            for k, v in hdr.items():
                s, e = v["data_offsets"]
                self.t[k] = (v["dtype"], tuple(v["shape"]), raw[base + s: base + e])
        with open(os.path.join(d, "config.json")) as f:
            self.config = json.load(f)

    def names(self):
        return sorted(self.t)

    def has(self, k):
        return k in self.t

    def f32(self, k):
        """Tensor k as float32 (F32/BF16/F16 stored values; F8_E4M3 decoded; U8 as numbers)."""
        dt, shape, b = self.t[k]
        if dt == "F32":
            a = b.view("<f4")
        elif dt == "BF16":
            a = bf16_to_f32(b.view("<u2"))
        elif dt == "F16":
            a = b.view("<f2").astype(np.float32)
        elif dt == "F8_E4M3":
            a = e4m3_to_f32(b)
        elif dt == "U8":
            a = b.astype(np.float32)
        else:
            raise ValueError(f"dtype {dt} of {k}")
        return a.reshape(shape).astype(np.float32)

    def raw(self, k):
        dt, shape, b = self.t[k]
        return b.reshape(shape) if shape else b

    def scalar(self, k):
        return float(self.f32(k).reshape(-1)[0])


def nvfp4_dequant(packed, bscale_u8, gs_ct):
    """packed (rows, cols/2) u8, low nibble first; bscale (rows, cols/16) e4m3; CT global scale
    (divisor). Returns float32 (rows, cols) = e2m1 * e4m3 / gs."""
    rows = packed.shape[0]
    lo = packed & 0xF
    hi = packed >> 4
    nib = np.stack([lo, hi], axis=-1).reshape(rows, -1)
    q = E2M1[nib]
    s = np.repeat(e4m3_to_f32(bscale_u8), 16, axis=1)
    return (q * s / np.float32(gs_ct)).astype(np.float32)


def fp8_dequant(q_u8, scale, block=None):
    """q (rows, cols) e4m3; scale: [1] / [rows,1] multiplier, or [rows/b, cols/b] block scales."""
    w = e4m3_to_f32(q_u8)
    rows, cols = w.shape
    scale = np.asarray(scale, dtype=np.float32)
    if block:
        s = np.repeat(np.repeat(scale, block, axis=0), block, axis=1)[:rows, :cols]
        return (w * s).astype(np.float32)
    if scale.size == 1:
        return (w * scale.reshape(())).astype(np.float32)
    return (w * scale.reshape(rows, 1)).astype(np.float32)


def quant_format(cfg, d):
    """('none'|'ct-nvfp4'|'ct-fp8'|'modelopt-nvfp4'|'fp8-block', w4a4: bool, block)."""
    q = cfg.get("quantization_config")
    if os.path.exists(os.path.join(d, "hf_quant_config.json")):
        with open(os.path.join(d, "hf_quant_config.json")) as f:
            hq = json.load(f)["quantization"]
        return "modelopt-nvfp4", hq["quant_algo"] == "NVFP4", None
    if not q:
        return "none", False, None
    if q["quant_method"] == "compressed-tensors":
        g = next(iter(q["config_groups"].values()))
        if g["weights"]["num_bits"] == 4:
            return "ct-nvfp4", g.get("input_activations") is not None, None
        return "ct-fp8", False, None
    if q["quant_method"] == "fp8":
        return "fp8-block", False, int(q["weight_block_size"][0])
    raise ValueError(f"unknown quantization {q['quant_method']}")


def linear(ck, module, fmt, block=None):
    """Dequantized weight of Linear `module` and its W4A4 input global scale (CT sense) or None."""
    if ck.has(module + ".weight_packed"):  # compressed-tensors NVFP4
        w = nvfp4_dequant(ck.raw(module + ".weight_packed"), ck.raw(module + ".weight_scale"),
                          ck.scalar(module + ".weight_global_scale"))
        gin = ck.scalar(module + ".input_global_scale") if ck.has(module + ".input_global_scale") else None
        return w, gin
    if ck.has(module + ".weight_scale_2"):  # ModelOpt NVFP4: multiply by weight_scale_2
        w = nvfp4_dequant(ck.raw(module + ".weight"), ck.raw(module + ".weight_scale"),
                          1.0 / ck.scalar(module + ".weight_scale_2"))
        gin = 1.0 / ck.scalar(module + ".input_scale") if ck.has(module + ".input_scale") else None
        return w, gin
    if ck.has(module + ".weight_scale_inv"):
        return fp8_dequant(ck.raw(module + ".weight"), ck.f32(module + ".weight_scale_inv"), block), None
    if ck.has(module + ".weight_scale") and ck.t[module + ".weight"][0] == "F8_E4M3":
        return fp8_dequant(ck.raw(module + ".weight"), ck.f32(module + ".weight_scale")), None
    return ck.f32(module + ".weight"), None


def text_config(cfg):
    return cfg.get("text_config", cfg)


def load_dense(ck):
    """The checkpoint as a dict of float32 arrays named like Qwen3_5MoeForCausalLM parameters
    (model.X, lm_head.weight, fused experts.gate_up_proj/down_proj) plus mtp.* (fused too),
    and {module: g_in} for W4A4 modules."""
    cfg = text_config(ck.config)
    fmt, w4a4, block = quant_format(ck.config, ck.dir)
    E = cfg["num_experts"]
    out, gins = {}, {}
    names = ck.names()
    prefixes = ("model.language_model.", "model.")
    done = set()
    for k in names:
        if k in done:
            continue
        if k.startswith("mtp."):
            canon = k
        elif k == "lm_head.weight":
            canon = k
        else:
            p = next(p for p in prefixes if k.startswith(p))
            canon = "model." + k[len(p):]
        # per-expert modules -> handled below
        if ".mlp.experts." in k and not (k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj")):
            continue
        suffix = k.rsplit(".", 1)[-1]
        if suffix in ("weight_packed", "weight_scale", "weight_global_scale", "input_global_scale",
                      "weight_scale_2", "input_scale", "weight_scale_inv") or \
                (suffix == "weight" and ck.t[k][0] in ("U8", "F8_E4M3")):
            module = k.rsplit(".", 1)[0]
            if module in done:
                continue
            done.add(module)
            w, gin = linear(ck, module, fmt, block)
            cm = canon.rsplit(".", 1)[0]
            out[cm + ".weight"] = w
            if gin is not None:
                gins[cm] = gin
            continue
        out[canon] = ck.f32(k)
    # per-expert 2-D modules -> fused
    layer_prefixes = sorted({k.split(".mlp.experts.")[0] for k in names
                             if ".mlp.experts." in k and not k.endswith("_proj")})
    for lp in layer_prefixes:
        canon_lp = lp if lp.startswith("mtp.") else "model." + lp[len(next(p for p in prefixes if lp.startswith(p))):]
        gus, dns = [], []
        for e in range(E):
            g, gg = linear(ck, f"{lp}.mlp.experts.{e}.gate_proj", fmt, block)
            u, gu = linear(ck, f"{lp}.mlp.experts.{e}.up_proj", fmt, block)
            d, gd = linear(ck, f"{lp}.mlp.experts.{e}.down_proj", fmt, block)
            gus.append(np.concatenate([g, u], axis=0))
            dns.append(d)
            if gg is not None:
                gins[f"{canon_lp}.mlp.experts.{e}.gate_up"] = gg
                gins[f"{canon_lp}.mlp.experts.{e}.down"] = gd
                assert gg == gu, "gate/up input scales differ"
        out[canon_lp + ".mlp.experts.gate_up_proj"] = np.stack(gus)
        out[canon_lp + ".mlp.experts.down_proj"] = np.stack(dns)
    return out, gins, fmt, w4a4
