#!/bin/sh
# dev only: mirror /work/main into /work/fuzztree with the two lines the lead will add
# (option TERN_FUZZ + add_subdirectory(tests/fuzz)), so fuzz builds can be tried before that.
set -e
mkdir -p /work/fuzztree
cd /work/main
tar --exclude=./build --exclude=./.deps --exclude=./.git -cf - . | (cd /work/fuzztree && tar -xf -)
ln -sfn /work/main/.deps /work/fuzztree/.deps
cd /work/fuzztree
grep -q TERN_FUZZ CMakeLists.txt || {
  sed -i 's/^option(TERN_SANITIZE_THREAD.*/&\noption(TERN_FUZZ "Build the libFuzzer targets in tests\/fuzz (clang only)" OFF)/' CMakeLists.txt
  printf 'if(TERN_FUZZ)\n  add_subdirectory(tests/fuzz)\nendif()\n' >> CMakeLists.txt
}
