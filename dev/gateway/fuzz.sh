#!/usr/bin/env bash
# Scratch: build and run the gateway fuzz harness for N seconds (default 30).
set -euo pipefail
cd "$(dirname "$0")/../.."
S=services/gateway
clang -g -O1 -fsanitize=fuzzer,address,undefined -I$S -Icommon/include -D_GNU_SOURCE \
  dev/gateway/fuzz_req.c $S/gw_req.c $S/gw_arena.c common/buf.c $S/gw_sse.c common/xalloc.c common/err.c common/log.c \
  -lcjson -lm -o /tmp/gw_fuzz_req
mkdir -p /tmp/gw_fuzz_corpus
printf '{"messages":[{"role":"user","content":"hi"}],"temperature":0.5,"stop":["a"],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}' > /tmp/gw_fuzz_corpus/a
printf '{"prompt":[1,2,3],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}' > /tmp/gw_fuzz_corpus/b
printf 'data: {"x":1}\n\ndata: [DONE]\r\n\r\n' > /tmp/gw_fuzz_corpus/c
/tmp/gw_fuzz_req -max_total_time=${1:-30} -max_len=4096 /tmp/gw_fuzz_corpus
