#!/usr/bin/python3
"""Scratch (dev/compare): write a header-only checkpoint at the FULL Qwen3.6-35B-A3B geometry
(tests/configs/qwen3.6-35b-a3b.json) in the layouts `tern make-tiny-model` uses:
bf16 (fused 3-D experts), compressed-tensors NVFP4A16 (weight-only) or NVFP4 (W4A4), with or
without the 19 mtp.* tensors (kept BF16). Quantized modules: routed experts (per-expert 2-D),
shared expert, attention q/k/v/o; BF16: embeddings, lm_head, GDN, router, shared_expert_gate,
norms. The shard file holds only its 8+N header bytes; tern's header-only load accepts that.

This is a synthetic layout built from the docs, NOT the contents of any published checkpoint.

usage: fullsize_headers.py OUTDIR bf16|nvfp4a16|nvfp4 [--no-mtp] [--tiny-config DIR]
  --tiny-config DIR: take quantization_config from DIR/config.json (a make-tiny-model output of
  the same format), so the recipe text is exactly the one the tiny tests use.
"""
import json
import os
import struct
import sys

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "configs", "qwen3.6-35b-a3b.json")


def main():
    out, fmt = sys.argv[1], sys.argv[2]
    mtp = "--no-mtp" not in sys.argv
    tiny = sys.argv[sys.argv.index("--tiny-config") + 1] if "--tiny-config" in sys.argv else None
    cfg = json.load(open(SRC))
    tc = cfg["text_config"]
    H, V, E = tc["hidden_size"], tc["vocab_size"], tc["num_experts"]
    I, Is = tc["moe_intermediate_size"], tc["shared_expert_intermediate_size"]
    Hq, Hkv, D = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
    Hk, Hv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    Dk, Dv, Kc = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["linear_conv_kernel_dim"]
    quant = fmt != "bf16"
    act = fmt == "nvfp4"
    hdr = {}
    off = [0]
    size = {"BF16": 2, "F32": 4, "U8": 1, "F8_E4M3": 1}

    def t(name, dt, shape):
        n = size[dt]
        for s in shape:
            n *= s
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off[0], off[0] + n]}
        off[0] += n

    def lin(m, rows, cols, q):
        if not q:
            t(m + ".weight", "BF16", [rows, cols])
            return
        t(m + ".weight_packed", "U8", [rows, cols // 2])
        t(m + ".weight_scale", "F8_E4M3", [rows, cols // 16])
        t(m + ".weight_global_scale", "F32", [1])
        if act:
            t(m + ".input_global_scale", "F32", [1])

    def moe(P, q):
        lin(P + "mlp.gate", E, H, False)
        if q:
            for e in range(E):
                x = "%smlp.experts.%d." % (P, e)
                lin(x + "gate_proj", I, H, True)
                lin(x + "up_proj", I, H, True)
                lin(x + "down_proj", H, I, True)
        else:
            t(P + "mlp.experts.gate_up_proj", "BF16", [E, 2 * I, H])
            t(P + "mlp.experts.down_proj", "BF16", [E, H, I])
        for p, r, c in (("gate_proj", Is, H), ("up_proj", Is, H), ("down_proj", H, Is)):
            lin(P + "mlp.shared_expert." + p, r, c, q)
        lin(P + "mlp.shared_expert_gate", 1, H, False)

    def layer(P, full, q):
        t(P + "input_layernorm.weight", "BF16", [H])
        t(P + "post_attention_layernorm.weight", "BF16", [H])
        if full:
            a = P + "self_attn."
            lin(a + "q_proj", Hq * D * 2, H, q)
            lin(a + "k_proj", Hkv * D, H, q)
            lin(a + "v_proj", Hkv * D, H, q)
            lin(a + "o_proj", H, Hq * D, q)
            t(a + "q_norm.weight", "BF16", [D])
            t(a + "k_norm.weight", "BF16", [D])
        else:
            g = P + "linear_attn."
            conv = 2 * Hk * Dk + Hv * Dv
            lin(g + "in_proj_qkv", conv, H, False)
            lin(g + "in_proj_z", Hv * Dv, H, False)
            lin(g + "in_proj_b", Hv, H, False)
            lin(g + "in_proj_a", Hv, H, False)
            lin(g + "out_proj", H, Hv * Dv, False)
            t(g + "conv1d.weight", "BF16", [conv, 1, Kc])
            t(g + "dt_bias", "BF16", [Hv])
            t(g + "A_log", "F32", [Hv])
            t(g + "norm.weight", "BF16", [Dv])
        moe(P, q)

    P = "model.language_model."
    t(P + "embed_tokens.weight", "BF16", [V, H])
    t(P + "norm.weight", "BF16", [H])
    t("lm_head.weight", "BF16", [V, H])
    for i, ty in enumerate(tc["layer_types"]):
        layer("%slayers.%d." % (P, i), ty == "full_attention", quant)
    if mtp:
        lin("mtp.fc", H, 2 * H, False)
        for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            t("mtp.%s.weight" % n, "BF16", [H])
        layer("mtp.layers.0.", True, False)

    os.makedirs(out, exist_ok=True)
    if tiny:
        qc = json.load(open(os.path.join(tiny, "config.json"))).get("quantization_config")
        if qc:
            cfg["quantization_config"] = qc
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    shard = "model-00001-of-00001.safetensors"
    json.dump({"metadata": {"total_size": off[0]}, "weight_map": {k: shard for k in sorted(hdr)}},
              open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, shard), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
    print("%s: %d tensors, %.2f GiB of data described, header %d bytes" %
          (out, len(hdr), off[0] / 2**30, len(h)))


if __name__ == "__main__":
    main()
