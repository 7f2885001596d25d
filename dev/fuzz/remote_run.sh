#!/bin/bash
# dev only: on the device host, run every packed fuzzer for SECS seconds, one process per
# target (plus extra processes for the stateful ones) on all cores; results to $OUT as two
# archives (the device returns only a few files).
SECS=${1:-480}
set -u
W=/tmp/fz && rm -rf $W && mkdir -p $W && tar -xJf build-fuzzpack/pack.tar.xz -C $W
S=$W/s
nproc
R=$W/res
run() { # name instance
    local n=$1 i=$2 d=$R/$1.$2
    mkdir -p $d/art $W/corp/$n
    local extra=()
    [ -f $S/fz/$n.dict ] && extra+=(-dict=$S/fz/$n.dict)
    [ -f $S/fz/$n.options ] && extra+=($(cat $S/fz/$n.options))
    TERN_SOURCE_DIR=$S/tok ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    timeout -k 10 $((SECS + 60)) $S/lib/ld-linux-x86-64.so.2 --library-path $S/lib $S/bin/fuzz_$n \
        -max_total_time=$SECS -timeout=10 -rss_limit_mb=3000 -print_final_stats=1 \
        -artifact_prefix=$d/art/ "${extra[@]}" $W/corp/$n $S/fz/corpus/$n >$d/log.txt 2>&1
    echo $? >$d/rc
}
for b in $S/bin/fuzz_*; do
    n=${b##*/fuzz_}
    run $n 0 &
done
for n in sched http; do run $n 1 & done
wait
for d in $R/*.*; do
    echo "$(basename $d) rc=$(cat $d/rc) $(grep -E '^#[0-9]+' $d/log.txt | tail -1 | cut -c1-90) arts=$(ls $d/art | wc -l)"
done
(cd $W && tar -cJf $OUT/corpora.tar.xz corp && tar -cJf $OUT/res.tar.xz res)
