# dev fuzz for tokenizer parity: random text from many Unicode blocks + invalid bytes.
# usage: /usr/bin/python3 dev/tok/gen_fuzz.py OUTDIR N_FILES CHARS
import random, sys
out, nf, nc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ranges = [(0x20, 0x7e)] * 6 + [(0x09, 0x0d), (0xa0, 0x17f), (0x180, 0x24f), (0x300, 0x36f), (0x370, 0x3ff),
          (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff),
          (0x1680, 0x1680), (0x180e, 0x180e), (0x1e00, 0x1eff), (0x2000, 0x206f), (0x2070, 0x209f),
          (0x2100, 0x218f), (0x2190, 0x22ff), (0x2460, 0x24ff), (0x3000, 0x303f), (0x3040, 0x30ff),
          (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xfb00, 0xfb4f), (0xfe00, 0xfe0f), (0xfeff, 0xfeff),
          (0xff00, 0xffef), (0x1f300, 0x1faff), (0x1d400, 0x1d7ff), (0x20000, 0x2a6df), (0x85, 0x85),
          (0x2028, 0x2029), (0xe0000, 0xe007f)]
frags = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "<|endoftext|>", "<|im_", "'s", "'LL",
         "'T", " ", "  ", "\n", "\r\n", "\t"]
rnd = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 7)
for i in range(nf):
    b = bytearray()
    for _ in range(nc):
        x = rnd.random()
        if x < 0.08:
            b += rnd.choice(frags).encode()
        elif x < 0.10:
            b += bytes([rnd.randrange(0x80, 0x100)])
        else:
            lo, hi = rnd.choice(ranges)
            b += chr(rnd.randint(lo, hi)).encode('utf-8', 'surrogatepass')
    open(f"{out}/f{i:03d}.txt", "wb").write(bytes(b))
