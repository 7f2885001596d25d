#!/usr/bin/env bash
# scripts/build.sh (what ./run.sh runs) twice in a fresh folder. The first configure of a tree
# and the second must write the same compile flags for every target (a changed flags.make
# rebuilds all its objects), and the second build of a target must compile nothing. Builds only
# tern_common (libzmq's flags moved between configures before; the flags.make comparison covers
# every other target) to stay within CI's time.
set -euo pipefail
src=${TERN_SOURCE_DIR:-$PWD}
dir=$(mktemp -d /tmp/tern-rebuild.XXXXXX)
trap 'rm -rf "$dir"' EXIT
flags() { find "$dir" -name flags.make -print0 | sort -z | xargs -0 md5sum; }

"$src/scripts/build.sh" "$dir" tern_common >/dev/null
flags >"$dir/flags.1"
out=$("$src/scripts/build.sh" "$dir" tern_common)
flags >"$dir/flags.2"
fail=0
if ! diff "$dir/flags.1" "$dir/flags.2"; then
  echo "FAIL: the second configure changed the compile flags of the targets above"
  fail=1
fi
if grep -E "Building|Linking" <<<"$out"; then
  echo "FAIL: the second build compiled again (lines above)"
  fail=1
fi
n=$(wc -l <"$dir/flags.1")
((fail)) || echo "ok: $n targets with the same flags, second build of tern_common compiled nothing"
exit "$fail"
