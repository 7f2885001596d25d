#!/bin/sh
# loader's private build: snapshot the tree without folders other engineers are mid-way on.
set -e
rm -rf /tmp/loader_src.new && mkdir -p /tmp/loader_src.new
cd /work/main && tar cf - --exclude=./.git --exclude=./services --exclude=./tests/unit/gateway --exclude=./tests/unit/compare --exclude=./tests/unit/parity --exclude=./tests/unit/services \
  --exclude=./tests/integration --exclude=./tests/kernels --exclude=./bench --exclude=./.deps . \
  | (cd /tmp/loader_src.new && tar xf -)
# keep mtimes of unchanged files so rebuilds stay incremental
mkdir -p /tmp/loader_src
cd /tmp/loader_src.new && find . -type f | while read f; do
  cmp -s "$f" "/tmp/loader_src/$f" || { mkdir -p "/tmp/loader_src/$(dirname "$f")"; cp -p "$f" "/tmp/loader_src/$f"; }
done
cd /work
cmake -S /tmp/loader_src -B /work/build-loader -DTERN_CUDA=OFF > /tmp/loader_cmake.log 2>&1 || { grep -m5 -A4 "Error" /tmp/loader_cmake.log; exit 1; }
cmake --build /work/build-loader -j2 --target "$@" 2>&1 | grep -E "error|warning|Error" | head -40
