#!/usr/bin/env bash
# make demo: three strata nodes on 127.0.0.1 with small memory caps, so
# stories260K (1.2 MB of weights) must be split across all three; a prompt
# sent to the third node; the story, who ran which layers; a clean stop.
#
# NODE_ARGS adds flags to every node (scripts/bench-links.sh runs the demo
# with --transport tcp and shm to compare them). PROMPT_STAGE=first|middle|last
# sends the prompt to the node that holds that stage instead (after a short
# run that loads the shards): the session's origin then sits at that point
# of the ring, which decides how many of a token's hops cross processes.
set -euo pipefail
BIN=${BIN:-bin/strata}
read -ra node_args <<<"${NODE_ARGS:-}"
TESTDATA=${STRATA_TESTDATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/testdata}
MODEL=$TESTDATA/gguf/stories260K.gguf
[ -f "$MODEL" ] || { echo "demo: $MODEL not found (set STRATA_TESTDATA)" >&2; exit 1; }

D=$(mktemp -d /tmp/strata-demo.XXXXXX)
mkdir -p "$D/models"
ln -s "$MODEL" "$D/models/stories260K.gguf"
base=$((20000 + RANDOM % 12000)) # ports base+1..3 (peers), base+11..13 (API); below the ephemeral ports (32768-)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$D"
}
trap cleanup EXIT

A=/ip4/127.0.0.1/tcp/$((base + 1))/p2p/$("$BIN" node id --data-dir "$D/a")
for i in 1 2 3; do
	name=$(printf "\\x$(printf %x $((96 + i)))") # a, b, c
	join=()
	[ "$i" = 1 ] || join=(--join "$A")
	"$BIN" node --data-dir "$D/$name" --secret-file "$D/a/secret" --no-mdns \
		--listen /ip4/127.0.0.1/tcp/$((base + i)) --api 127.0.0.1:$((base + 10 + i)) \
		--models "$D/models" --memory 800kB --context 512 --parallel 1 "${join[@]}" ${node_args[@]+"${node_args[@]}"} >"$D/$name.log" 2>&1 &
	pids+=($!)
done
API=127.0.0.1:$((base + 13))
echo "== three nodes, 800 kB each; stories260K needs 1.9 MB (weights + KV for 512 positions)"
"$BIN" status --api "$API" --expect 3 --timeout 30s >/dev/null
if [ -n "${PROMPT_STAGE:-}" ]; then
	"$BIN" run --api "$API" --model stories260K --max-tokens 4 >/dev/null 2>&1 # loads the shards
	sleep 1.5 # one heartbeat: every node has announced its shard
	status=$("$BIN" status --api "$API")
	pick=""
	for i in 1 2 3; do
		name=$(printf "\\x$(printf %x $((96 + i)))")
		id=$("$BIN" node id --data-dir "$D/$name")
		range=$(awk -v id="$id" '$1 == id { for (f = 2; f <= NF; f++) if ($f ~ /^stories260K:[0-9]+-[0-9]+$/) { sub(/^stories260K:/, "", $f); print $f } }' <<<"$status")
		first=${range%-*} end=${range#*-}
		case $PROMPT_STAGE in
		first) [ "$first" = 0 ] && pick=$i ;;
		last) [ "$end" = 5 ] && pick=$i ;;
		middle) [ -n "$range" ] && [ "$first" != 0 ] && [ "$end" != 5 ] && pick=$i ;;
		esac
	done
	[ -n "$pick" ] || { echo "demo: no node holds the $PROMPT_STAGE stage:" >&2; echo "$status" >&2; exit 1; }
	API=127.0.0.1:$((base + 10 + pick))
	echo "== prompt sent to the node of the $PROMPT_STAGE stage ($API):"
else
	echo "== prompt sent to node c ($API):"
fi
"$BIN" run --api "$API" --model stories260K --max-tokens 200
echo "== who holds which layers (strata status):"
sleep 1.5 # one heartbeat, so every node has announced its shard
"$BIN" status --api "$API"
echo "== stopping the nodes"
