#!/usr/bin/env bash
# Decode speed of one answer on real strata node processes on this host.
#   scripts/bench-tp-nodes.sh MODEL NODES THREADS [PLACEMENT] [TRANSPORT]
# starts NODES nodes (each --threads THREADS, --placement PLACEMENT,
# default tp; --transport TRANSPORT, default auto = shared memory here),
# sends one greedy 64-token request ROUNDS times (default 4) through node 1's Ollama
# API and prints each one's decode tokens/s (eval_count / eval_duration;
# round 0 includes nothing of loading: the first token is not counted).
# Compare e.g. "2 1 tp" with "1 2 pipeline" (the same cores) and "1 1".
set -euo pipefail
BIN=${BIN:-bin/strata}
MODEL=$(realpath "$1"); N=$2; T=$3; PLACEMENT=${4:-tp}; TRANSPORT=${5:-auto}
D=$(mktemp -d /tmp/strata-tpnodes.XXXXXX)
mkdir -p "$D/models"
ln -s "$MODEL" "$D/models/m.gguf"
base=$((20000 + RANDOM % 12000)) # below the ephemeral ports (32768-)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$D"
}
trap cleanup EXIT
A=/ip4/127.0.0.1/tcp/$((base + 1))/p2p/$("$BIN" node id --data-dir "$D/n1")
for i in $(seq 1 "$N"); do
	join=()
	[ "$i" = 1 ] || join=(--join "$A")
	"$BIN" node --data-dir "$D/n$i" --secret-file "$D/n1/secret" --no-mdns --stores none \
		--listen /ip4/127.0.0.1/tcp/$((base + i)) --api 127.0.0.1:$((base + 10 + i)) \
		--models "$D/models" --context 512 --parallel 1 --threads "$T" \
		--placement "$PLACEMENT" --transport "$TRANSPORT" --mem-bandwidth 20GB/s "${join[@]}" >"$D/n$i.log" 2>&1 &
	pids+=($!)
done
API=127.0.0.1:$((base + 11))
"$BIN" status --api "$API" --expect "$N" --timeout 60s >/dev/null
echo "$N node(s) × $T thread(s), placement $PLACEMENT, transport $TRANSPORT (load: $(cut -d' ' -f1-3 /proc/loadavg))"
for r in $(seq 0 $((${ROUNDS:-4} - 1))); do
	curl -s "http://$API/api/generate" \
		-d '{"model":"m","prompt":"hello world","stream":false,"options":{"num_predict":64,"temperature":0}}' >"$D/out.json"
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('round', sys.argv[2], d['eval_count'], 'tokens', round(d['eval_count']/(d['eval_duration']/1e9), 2), 'tok/s')" "$D/out.json" "$r"
done
"$BIN" status --api "$API" | sed -n '2,$p' | cut -c1-140
