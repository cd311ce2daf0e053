#!/usr/bin/env bash
# make bench-vs-llamacpp: strata bench and llama.cpp (the prebuilt CPU
# build in node-llama-cpp, ../shared/bench/llamacpp-bench.mjs) side by side
# on the same synthetic tinyllama-1.1b file per type, alternating RUNS
# times; prints the best prefill (PP tokens) and decode (TG tokens) rate
# of each and strata's ratio to llama.cpp. Files are written once to
# MODELDIR and reused. The ratios are what matters: on a machine shared
# with other work, absolute rates swing from run to run.
set -euo pipefail
BIN=${BIN:-bin/strata}
TYPES=${TYPES:-Q8_0 Q4_0 Q4_K}
THREADS=${THREADS:-2}
RUNS=${RUNS:-3}
PP=${PP:-128}
TG=${TG:-64}
MODELDIR=${MODELDIR:-/tmp}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NODE_MODULES=${STRATA_NODE_MODULES:-$ROOT/.ci/npm/node_modules}
LLAMACPP_BENCH=${LLAMACPP_BENCH:-$ROOT/../shared/bench/llamacpp-bench.mjs}
[ -d "$NODE_MODULES/node-llama-cpp" ] || { echo "bench-vs-llamacpp: no node-llama-cpp in $NODE_MODULES (set STRATA_NODE_MODULES)" >&2; exit 1; }
[ -f "$LLAMACPP_BENCH" ] || { echo "bench-vs-llamacpp: $LLAMACPP_BENCH not found (set LLAMACPP_BENCH)" >&2; exit 1; }

field() { grep -o "\"$1\": *[0-9.e+-]*" | head -1 | sed 's/.*: *//'; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a + 0 > b + 0) ? a : b }'; }

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)), $THREADS threads, best of $RUNS alternating runs, pp$PP tg$TG"
printf '%-6s | %12s %12s %6s | %12s %12s %6s %s\n' type "pp strata" "pp llama" ratio "tg strata" "tg llama" ratio kernels
for t in $TYPES; do
	model=$MODELDIR/strata-bench-tinyllama-1.1b-$t.gguf
	[ -f "$model" ] || "$BIN" synth --shape tinyllama-1.1b --type "$t" -o "$model" >&2
	sp="" sd="" lp="" ld="" kernels=""
	for _ in $(seq "$RUNS"); do
		out=$("$BIN" bench --model "$model" --threads "$THREADS" --prompt-tokens "$PP" --gen-tokens "$TG" --bandwidth-mib 64 --json)
		sp=$(best "$(echo "$out" | field prefill_tokens_per_s)" "$sp")
		sd=$(best "$(echo "$out" | field decode_tokens_per_s)" "$sd")
		kernels=$(echo "$out" | grep -o '"kernels": *"[^"]*"' | sed 's/.*: *//; s/"//g' || true)
		out=$(NODE_PATH=$NODE_MODULES node "$LLAMACPP_BENCH" "$model" "$PP" "$TG" "$THREADS")
		lp=$(best "$(echo "$out" | field prefill_tokens_per_s)" "$lp")
		ld=$(best "$(echo "$out" | field decode_tokens_per_s)" "$ld")
	done
	awk -v t="$t" -v sp="$sp" -v lp="$lp" -v sd="$sd" -v ld="$ld" -v k="$kernels" 'BEGIN {
		printf "%-6s | %12.1f %12.1f %5.2fx | %12.1f %12.1f %5.2fx %s\n", t, sp, lp, sp / lp, sd, ld, sd / ld, k }'
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) (llama.cpp's threads spin while they wait, so on a loaded machine it loses more than strata: trust ratios from an idle machine only)"
