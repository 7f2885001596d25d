#!/usr/bin/env bash
# tests/gpu/sysroot.sh: on the build machine (Debian, libcjson-dev + libpcre2-dev installed by
# scripts/setup.sh), copy the cJSON and PCRE2 headers and libraries that libtern_model needs into
# .gpu/sysroot (git-ignored), so that a run on the GPU machine (which has neither) can carry it:
#   tests/gpu/sysroot.sh && <run on the GPU machine with carry [".gpu"]> tests/gpu/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
s=$root/.gpu/sysroot
lib=/usr/lib/$(gcc -print-multiarch)
mkdir -p "$s/include/cjson" "$s/lib"
cp /usr/include/cjson/cJSON.h "$s/include/cjson/"
cp /usr/include/pcre2.h "$s/include/"
cp "$lib/libpcre2-8.a" "$s/lib/"
cp -L "$lib/libcjson.so.1" "$s/lib/libcjson.so.1"
cp -L "$lib/libcjson.so.1" "$s/lib/libcjson.so"
echo "sysroot: $s ($(du -sh "$s" | cut -f1))"
