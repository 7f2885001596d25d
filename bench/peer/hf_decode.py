"""Peer for tests/gpu/gpu_bench: Hugging Face transformers on the same GPU, same config, random
bf16 weights, greedy generation after a prompt, timed.

Builds Qwen3_5MoeForCausalLM (transformers.models.qwen3_5_moe) from the text_config of one of
tern's config.json files (e.g. tests/configs/qwen3.6-35b-a3b.json; a quantization_config is
ignored: the peer is always bf16), with the library's own random initialisation, directly on the
GPU. Full depth by default (~65 GiB of bf16 weights fit on an H200); --layers N builds a
reduced-depth twin (the first N layer types) and scales the decode and prefill times to the full
depth by the ratio of per-token bytes (see bytes_per_token below), marking the line "scaled".

For each (batch, prompt length): random prompt ids, then
  ttft:  generate(max_new_tokens=1)                      (prefill + first token)
  total: generate(max_new_tokens=GEN, min_new_tokens=GEN) (EOS suppressed: exactly GEN tokens)
decode tok/s per stream = (GEN - 1) / (total - ttft). Each measurement is the median of --reps
runs after one warm-up. One JSON object per line on stdout (progress on stderr).

    python3 bench/peer/hf_decode.py tests/configs/qwen3.6-35b-a3b.json \
        --prompt-len 512,2048,8192 --batch 1,8 --gen 256
"""
import argparse
import json
import statistics
import sys
import time

import torch

import transformers
from transformers.models.qwen3_5_moe import configuration_qwen3_5_moe as C
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as M


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def ints(s):
    return [int(x) for x in s.split(",") if x]


def text_config(path, layers):
    with open(path) as f:
        full = json.load(f)
    tc = dict(full.get("text_config", full))
    tc.pop("model_type", None)
    tc.pop("quantization_config", None)
    n_full = int(tc["num_hidden_layers"])
    if layers and layers < n_full:
        tc["num_hidden_layers"] = layers
        if "layer_types" in tc:
            tc["layer_types"] = tc["layer_types"][:layers]
    tc["use_cache"] = True
    cfg = C.Qwen3_5MoeTextConfig(**tc)
    return cfg, n_full


def bytes_per_token(cfg, n_layers):
    """bf16 weight bytes one decode token reads with n_layers layers (dense + top-k experts +
    lm_head, as in model/roofline.h); only to scale a reduced-depth twin to full depth
    (an estimate: it assumes time proportional to bytes, which a launch-bound step is not)."""
    H, E, k = cfg.hidden_size, cfg.num_experts, cfg.num_experts_per_tok
    I, Is = cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size
    kd = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    vd = cfg.linear_num_value_heads * cfg.linear_value_head_dim
    hv = cfg.linear_num_value_heads
    gdn = (2 * kd + vd) * H + vd * H + 2 * hv * H + H * vd
    qd = cfg.num_attention_heads * cfg.head_dim
    attn = 2 * qd * H + 2 * cfg.num_key_value_heads * cfg.head_dim * H + H * qd
    moe = E * H + 3 * Is * H + H + k * 3 * I * H
    types = list(cfg.layer_types)
    if len(types) < n_layers:  # full depth from the same pattern
        interval = getattr(cfg, "full_attention_interval", 4) or 4
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                 for i in range(n_layers)]
    per = sum((attn if t == "full_attention" else gdn) + moe for t in types[:n_layers])
    return 2 * (per + cfg.vocab_size * H + H)  # + lm_head + one embedding row


def build(cfg, device):
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = M.Qwen3_5MoeForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    model = model.to(device=device, dtype=torch.bfloat16).eval()
    gc = model.generation_config
    gc.eos_token_id = None
    gc.pad_token_id = 0
    gc.do_sample = False
    return model


def timed_generate(model, ids, new_tokens, reps):
    times = []
    out = None
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    assert out.shape[1] == ids.shape[1] + new_tokens, out.shape
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--prompt-len", default="512,2048,8192")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--gen", type=int, default=256)
    ap.add_argument("--layers", type=int, default=0, help="reduced-depth twin (0 = full)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    cfg, n_full = text_config(a.config, a.layers)
    n_built = cfg.num_hidden_layers
    scale = bytes_per_token(cfg, n_full) / bytes_per_token(cfg, n_built)
    fla = getattr(transformers.utils, "is_flash_linear_attention_available", lambda: None)()
    conv = getattr(transformers.utils, "is_causal_conv1d_available", lambda: None)()
    log("torch", torch.__version__, "transformers", transformers.__version__, "device",
        torch.cuda.get_device_name(), "fla", fla, "causal_conv1d", conv)
    t0 = time.perf_counter()
    model = build(cfg, a.device)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"built {type(model).__name__} layers={n_built}/{n_full} params={n_params / 1e9:.2f}e9 "
        f"in {time.perf_counter() - t0:.1f} s; gpu mem {torch.cuda.memory_allocated() / 2**30:.1f} GiB")
    base = {
        "peer": "transformers", "transformers": transformers.__version__,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(),
        "config": a.config, "dtype": "bfloat16", "layers_built": n_built, "layers_full": n_full,
        "scaled": n_built != n_full, "scale": round(scale, 4),
        "attn_impl": getattr(model.config, "_attn_implementation", None),
        "experts_impl": getattr(model.config, "_experts_implementation", None),
        "fla": fla, "causal_conv1d": conv,
    }
    g = torch.Generator(device="cpu").manual_seed(1)
    V = cfg.vocab_size
    warm = torch.randint(0, V, (1, 32), generator=g).to(a.device)
    timed_generate(model, warm, 8, 1)
    for B in ints(a.batch):
        for P in ints(a.prompt_len):
            ids = torch.randint(0, V, (B, P), generator=g).to(a.device)
            try:
                timed_generate(model, ids, 2, 1)  # warm-up at this shape
                ttft = timed_generate(model, ids, 1, a.reps) * scale
                total = timed_generate(model, ids, a.gen, a.reps) * scale
            except torch.cuda.OutOfMemoryError as e:
                print(json.dumps({**base, "batch": B, "prompt_len": P, "gen": a.gen,
                                  "error": "out of memory: " + str(e)[:200]}), flush=True)
                torch.cuda.empty_cache()
                continue
            dec = total - ttft
            steps = a.gen - 1
            rec = {**base, "batch": B, "prompt_len": P, "gen": a.gen,
                   "ttft_ms": round(1e3 * ttft, 3),
                   "prefill_tok_s": round(B * P / ttft, 2) if ttft > 0 else None,
                   "decode_s": round(dec, 4),
                   "decode_tok_s_stream": round(steps / dec, 3) if dec > 0 else None,
                   "decode_tok_s_total": round(B * steps / dec, 3) if dec > 0 else None,
                   "total_s": round(total, 4),
                   "max_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
