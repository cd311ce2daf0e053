#!/usr/bin/env bash
# The latency-bound case of co-located nodes: make demo's three strata node
# processes (stories260K, 200 greedy tokens, one prompt) per link
# transport, runs alternated, best of RUNS (3). Prints tokens/s per
# transport and shm's ratio to tcp. A side channel that wakes its reader
# late shows here first: the steps are tiny, so every hop counts.
# TRANSPORTS lists the cases: a transport (shm, tcp), or one with
# "-noshortcut" appended, whose sessions send every token to the first
# stage from the origin (strata node --no-token-shortcut): one hop more
# per token. TRANSPORTS="shm shm-noshortcut" measures the shortcut.
set -euo pipefail
BIN=${BIN:-bin/strata}
RUNS=${RUNS:-3}
TRANSPORTS=${TRANSPORTS:-shm tcp}
declare -A best
for ((r = 1; r <= RUNS; r++)); do
	for tr in $TRANSPORTS; do
		args="--transport ${tr%-noshortcut}"
		[ "$tr" = "${tr%-noshortcut}" ] || args="$args --no-token-shortcut"
		out=$(NODE_ARGS="$args" BIN=$BIN "$(dirname "$0")/demo.sh" 2>&1) || { echo "$out" >&2; exit 1; }
		rate=$(sed -n 's/.*generated [0-9]* tokens in [^(]*(\([0-9.]*\) tok\/s).*/\1/p' <<<"$out")
		[ -n "$rate" ] || { echo "$out" >&2; echo "bench-links: no rate for $tr" >&2; exit 1; }
		echo "run $r $tr: $rate tok/s"
		if [ -z "${best[$tr]:-}" ] || awk -v a="$rate" -v b="${best[$tr]}" 'BEGIN{exit !(a>b)}'; then
			best[$tr]=$rate
		fi
	done
done
for tr in $TRANSPORTS; do echo "best $tr: ${best[$tr]} tok/s (3 processes, stories260K, 200 tokens)"; done
if [ -n "${best[shm]:-}" ] && [ -n "${best[tcp]:-}" ]; then
	awk -v a="${best[shm]}" -v b="${best[tcp]}" 'BEGIN{printf "shm/tcp: %.2fx\n", a/b}'
fi
for tr in shm tcp; do
	if [ -n "${best[$tr]:-}" ] && [ -n "${best[$tr-noshortcut]:-}" ]; then
		awk -v t="$tr" -v a="${best[$tr]}" -v b="${best[$tr-noshortcut]}" 'BEGIN{printf "%s, shortcut/without: %.2fx\n", t, a/b}'
	fi
done
