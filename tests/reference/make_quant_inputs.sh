#!/bin/sh
# Write the tern-made inputs of the q_* fixtures into DIR (default .fixt) with the tern CLI.
# Then, on a machine with torch + transformers:
#   PYTHONUNBUFFERED=1 python3 tests/reference/make_fixtures.py --out tests/reference/fixtures --quant-dir .fixt
set -eu
T=${TERN:-build/bin/tern}
D=${1:-.fixt}
C="--vocab 256 --hidden 48 --experts 4 --top-k 2 --moe-inter 32 --shared-inter 32 --seed 7"
mkdir -p "$D"
$T make-tiny-model "$D/q_bf16" $C --layers LLF
$T make-tiny-model "$D/q_nvfp4a16" $C --layers LLF --format nvfp4a16
$T make-tiny-model "$D/q_nvfp4" $C --layers LFL --format nvfp4
$T make-tiny-model "$D/q_modelopt_nvfp4" $C --layers LLF --format modelopt-nvfp4
$T make-tiny-model "$D/q_fp8" $C --layers LLF --format fp8
$T make-tiny-model "$D/q_fp8_tensor" $C --layers FL --format fp8 --fp8-scale tensor --no-mtp
$T make-tiny-model "$D/q_fp8_block" $C --layers LLF --format fp8-block --fp8-block 32
