#!/usr/bin/env bash
# make bench-speculate: speculative decoding, single stream, with and
# without guesses, on real `strata node` processes, side by side with
# llama-server's draft-model speculation on the same pair.
#
# The pair: a synthetic tinyllama-1.1b Q4_K target written with --peaked
# (its residual carries a token channel that decides the top logit, as
# the tiny test shapes do) and its draft, the same shape and seed with 2
# layers: the draft shares the target's embedding, output head, first two
# layers and channel, so the two agree often, as a trained pair does.
# Without --peaked a random 22-layer model and its 2-layer prefix agree
# on almost nothing (measured: 0 of 70 guesses), which measures only the
# cost of guessing wrong.
#
# Rows: one node (THREADS threads) and a pipeline of 3 nodes (1 thread
# each, memory capped so that each holds a stage); for each, the decode
# tokens/s of `strata run --api` with --speculate off, ngram and draft
# (ROUNDS times, alternated), the acceptance, and whether the text equals
# the text without speculation. Then stories260K with n-gram lookup on a
# prompt that holds the story it is asked to continue. llama-server
# (native build, ../shared/bench/build-llamacpp.sh; LLAMA_SERVER or
# LLAMACPP_DIR) runs the same pair with -md, THREADS threads, and without.
# Each server gets a fresh copy of the files (see bench-concurrent.sh).
# Not part of make test.
set -euo pipefail
BIN=${BIN:-bin/strata}
THREADS=${THREADS:-2}
TOKENS=${TOKENS:-128}
ROUNDS=${ROUNDS:-2}
MODELDIR=${MODELDIR:-/tmp}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TESTDATA=${STRATA_TESTDATA:-$ROOT/../shared/testdata}
LLAMA_SERVER=${LLAMA_SERVER:-${LLAMACPP_DIR:-/tmp/llamacpp}/build/bin/llama-server}
PORT=${PORT:-7490}
PARTS=${PARTS:-tinyllama stories llama-server}
has() { [[ " $PARTS " == *" $1 "* ]]; }
[ -x "$LLAMA_SERVER" ] || { echo "bench-speculate: no llama-server at $LLAMA_SERVER: strata only" >&2; LLAMA_SERVER=; }
work=$(mktemp -d)
pid=
stop() {
	local p
	for p in $pid; do kill "$p" 2>/dev/null || true; done
	for p in $pid; do wait "$p" 2>/dev/null || true; done
	pid=
}
trap 'stop; rm -rf "$work"' EXIT

target=$MODELDIR/strata-spec-tinyllama-1.1b-Q4_K-peaked.gguf
draft=$MODELDIR/strata-spec-tinyllama-1.1b-Q4_K-peaked-2layers.gguf
[ -f "$target" ] || "$BIN" synth --shape tinyllama-1.1b --type Q4_K --peaked -o "$target" >&2
[ -f "$draft" ] || "$BIN" synth --shape tinyllama-1.1b --type Q4_K --peaked --layers 2 -o "$draft" >&2

# start NODES THREADS MODEL [DRAFT]: NODES strata nodes serving fresh
# copies of MODEL as "m"; the first (the API's) runs DRAFT.
start() {
	local nodes=$1 threads=$2 model=$3 d=${4:-} i join=() spec=()
	rm -rf "$work/node" && mkdir -p "$work/node/models"
	cp "$model" "$work/node/models/m.gguf"
	if [ -n "$d" ]; then cp "$d" "$work/node/draft.gguf" && spec=(--speculate "draft:$work/node/draft.gguf"); fi
	local share=${SHARE:-$(( ($(stat -c %s "$model") + 200 * 1024 * 1024) * 130 / 100 / nodes ))}
	local mem=()
	[ "$nodes" = 1 ] || mem=(--memory "$share")
	local first=/ip4/127.0.0.1/tcp/$((PORT + 101))/p2p/$("$BIN" node id --data-dir "$work/node/d1")
	for ((i = 1; i <= nodes; i++)); do
		[ "$i" = 1 ] || { join=(--join "$first"); spec=(); }
		"$BIN" node --data-dir "$work/node/d$i" --secret-file "$work/node/d1/secret" --listen "/ip4/127.0.0.1/tcp/$((PORT + 100 + i))" \
			--api "127.0.0.1:$([ "$i" = 1 ] && echo "$PORT" || echo $((PORT + 200 + i)))" "${mem[@]}" "${spec[@]}" \
			--models "$work/node/models" --threads "$threads" --context 1024 --no-mdns ${NODEFLAGS:-} "${join[@]}" >"$work/node$i.log" 2>&1 &
		pid="$pid $!"
	done
	"$BIN" status --api "127.0.0.1:$PORT" --expect "$nodes" --timeout 60s >/dev/null
	# A node fills protoactor's process registry in its first second or
	# so (peers.SettleActorRegistry), on a core the answers would use.
	sleep "${SETTLE:-2}"
}

# gen SPECULATE PROMPT: one answer; prints "tok/s drafted accepted" and
# keeps the text in $work/text-SPECULATE.
gen() {
	"$BIN" run --api "127.0.0.1:$PORT" --model m --prompt "$2" --max-tokens "$TOKENS" --speculate "$1" \
		>"$work/text-$1" 2>"$work/err"
	local line
	line=$(cat "$work/err")
	local r d a
	r=$(sed -E 's/.*generated [0-9]+ tokens in [^(]*\(([0-9.]+) tok\/s\).*/\1/' <<<"$line")
	d=$(sed -nE 's/.*speculation ([0-9]+) of ([0-9]+) guesses.*/\2/p' <<<"$line")
	a=$(sed -nE 's/.*speculation ([0-9]+) of ([0-9]+) guesses.*/\1/p' <<<"$line")
	echo "$r ${d:-0} ${a:-0}"
}

# row LABEL PROMPT SOURCES...: ROUNDS alternated answers per source.
row() {
	local label=$1 prompt=$2 s r base
	shift 2
	declare -A sum=() got=()
	for ((r = 1; r <= ROUNDS; r++)); do
		for s in "$@"; do
			read -r rate d a < <(gen "$s" "$prompt")
			sum[$s]="${sum[$s]:-} $rate"
			got[$s]="$d $a"
			cp "$work/text-$s" "$work/last-$s"
		done
	done
	for s in "$@"; do
		local same=yes
		cmp -s "$work/last-$s" "$work/last-off" || same=NO
		read -r d a <<<"${got[$s]}"
		local acc=-
		[ "$d" = 0 ] || acc=$(awk -v a="$a" -v d="$d" 'BEGIN { printf "%d%%", 100 * a / d }')
		local mean
		mean=$(awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.1f", s / NF }' <<<"${sum[$s]}")
		base=$(awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.2f", s / NF }' <<<"${sum[off]}")
		printf '%-34s %-6s decode %6s tok/s (%s)  %5.2fx  accepted %s of %s (%s)  same text: %s\n' \
			"$label" "$s" "$mean" "${sum[$s]# }" "$(awk -v m="$mean" -v b="$base" 'BEGIN { print m / b }')" "$a" "$d" "$acc" "$same"
	done
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') ($(nproc) cores), $TOKENS tokens, greedy"
prompt="Once upon a time"
if has tinyllama; then
	start 1 "$THREADS" "$target" "$draft"
	row "tinyllama Q4_K, 1 node x$THREADS" "$prompt" off ngram draft
	stop
	# SHARE3 a node (300 MB; the first keeps the draft's 125 MB of it):
	# three stages (9, 9 and 4 layers here). The share above let two nodes
	# hold the target and left the first with the draft alone. A first
	# answer loads the stages, and their split is checked before the rows.
	SHARE=${SHARE3:-300000000} start 3 1 "$target" "$draft"
	"$BIN" run --api "127.0.0.1:$PORT" --model m --prompt "$prompt" --max-tokens 2 --speculate off >/dev/null 2>&1
	shards=$("$BIN" status --api "127.0.0.1:$PORT" | { grep -oE ' m:[0-9]+-[0-9]+' || true; } | tr -d ' ' | sort -t: -k2 -n | tr '\n' ' ')
	echo "tinyllama Q4_K, 3 nodes x1: stages (first-end) ${shards:-none}"
	[ "$(wc -w <<<"$shards")" = 3 ] || { echo "bench-speculate: tinyllama was not split in three" >&2; exit 1; }
	row "tinyllama Q4_K, 3 nodes x1" "$prompt" off ngram draft
	stop
fi

# n-gram lookup on repeated text: stories260K's own story (200 tokens),
# then its first two sentences again, to be continued. (Only "Once upon
# a time" after the story: the model tells another story, and n-gram
# lookup guesses 13 of 38 right.)
if has stories; then
	stories=$TESTDATA/gguf/stories260K.gguf
	story=$("$BIN" run --model "$stories" --max-tokens 200 2>/dev/null)
	retell="$story
$(grep -oE '^([^.]*\.){2}' <<<"$story" | head -1)"
	start 1 "$THREADS" "$stories"
	row "stories260K retold, 1 node x$THREADS" "$retell" off ngram
	stop
	# 1.7 MB a node: 2, 2 and 1 of its 5 layers with KV for 4 sessions of
	# 1024 positions (the tinyllama share would put all on one node).
	SHARE=1700000 start 3 1 "$stories"
	row "stories260K retold, 3 nodes x1" "$retell" off ngram
	"$BIN" status --api "127.0.0.1:$PORT" | grep -qE ' m:4-5( |$)' || { echo "bench-speculate: stories260K was not split in three" >&2; exit 1; }
	stop
fi

if [ -n "$LLAMA_SERVER" ] && has llama-server; then
	for md in "" "$draft"; do
		cp "$target" "$work/t.gguf"
		args=()
		if [ -n "$md" ]; then cp "$md" "$work/d.gguf" && args=(-md "$work/d.gguf" --spec-draft-n-max 8 -td "$THREADS"); fi
		"$LLAMA_SERVER" -m "$work/t.gguf" "${args[@]}" -t "$THREADS" -c 1024 --host 127.0.0.1 --port "$PORT" >"$work/llama.log" 2>&1 &
		pid=$!
		for _ in $(seq 1 240); do curl -sf "127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.5; done
		rates=
		for ((r = 1; r <= ROUNDS; r++)); do
			# Its own decode rate (timings), greedy, the same prompt.
			rates="$rates $(curl -sf "127.0.0.1:$PORT/completion" -H 'Content-Type: application/json' \
				-d "{\"prompt\": \"$prompt\", \"n_predict\": $TOKENS, \"temperature\": 0, \"ignore_eos\": true, \"cache_prompt\": false}" |
				python3 -c 'import json,sys; d = json.load(sys.stdin)["timings"]; print("%.1f" % d["predicted_per_second"])')"
		done
		printf '%-34s %-6s decode %s tok/s\n' "llama-server x$THREADS" "$([ -n "$md" ] && echo "-md" || echo off)" "${rates# }"
		stop
	done
fi
