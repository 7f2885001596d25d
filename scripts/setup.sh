#!/usr/bin/env bash
# Installs what tern needs on Debian 12 (as root): Debian packages, then the pinned npm
# packages (tokenizer data, reference tokenizer, OpenAI SDK for tests) into .deps/.
# Idempotent: does nothing that is already done. Exit non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PKGS=(build-essential cmake pkg-config git curl ca-certificates
  libuv1-dev libzmq3-dev libprotobuf-c-dev protobuf-c-compiler node-llhttp libcjson-dev
  libpcre2-dev libutf8proc-dev libsystemd-dev python3 python3-jinja2 python3-numpy clang
  libclang-rt-14-dev gnuplot-nox systemd)

missing=()
for p in "${DEB_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# Node.js may come from elsewhere than Debian (this machine kind ships v20 with npm 11):
# install Debian's only when the commands are missing.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" != 0 ]; then echo "setup: need root to install packages" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm packages pinned in deps/package.json (lockfile committed), installed into .deps/
mkdir -p .deps
if ! cmp -s deps/package.json .deps/package.json || [ ! -d .deps/node_modules ]; then
  cp deps/package.json deps/package-lock.json .deps/
  (cd .deps && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup: ok"
