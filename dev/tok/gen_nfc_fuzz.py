# dev fuzz for NFC boundaries: dense mixes of starters, combining marks, jamo, kana voicing marks.
# usage: /usr/bin/python3 dev/tok/gen_nfc_fuzz.py OUTDIR N_FILES CHARS SEED
import random, sys
out, nf, nc, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
alpha = ['a', 'e', 'o', 'A', ' ', 'x', '\u0301', '\u0323', '\u0308', '\u0304', '\u0344', '\u0345',
         '\uac00', '\uac01', '\u1100', '\u1161', '\u11a8', '\u4e2d', '\u304b', '\u3099', '\u309a',
         '\u212b', '\u2126', '\u00e9', '\u1e9b', '\u0b47', '\u0b3e', '\u0f71', '\u0f72', '\u05b8',
         '\u0591', '1', '\n', '\ufeff', '\u00c5', '\u0958', '\ufb2a']
r = random.Random(seed)
for i in range(nf):
    s = ''.join(r.choice(alpha) for _ in range(nc))
    open(f"{out}/n{i:03d}.txt", "w", encoding="utf-8").write(s)
