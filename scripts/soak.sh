#!/usr/bin/env bash
# The soak (internal/soak): NODES real strata nodes (4), a model that
# needs two of them, CLIENTS clients (6) mixing the APIs, and a fault
# (SIGKILL and restart, SIGSTOP for 1-30 s, a graceful leave and restart,
# a restart with the disk budget full and no model file for 10-60 s,
# and with network namespaces a member's link cut for 1-30 s and a pair of
# members unable to reach each other for 1-30 s) every
# FAULT_MIN..FAULT_MAX (20s..60s) for DURATION (10m), after WARMUP (60s)
# of traffic, from SEED (printed; default the time); the memory baseline
# is sampled idle after SETTLE (5m) of faults (0: right after the warm-up;
# the report keeps the growth from the warm-up too); CHECKPOINT (e.g. 5m)
# samples idle memory again every so long between baseline and end; FAULTS limits the
# kinds (e.g. cut,kill). NETWORK: auto (a
# network namespace per node, joined by veth pairs and bridges, links
# shaped to LINK_RATE with tc tbf, when run as root), netns, or loopback.
# Invariants are checked as it runs and at the end; the last line is the
# report's JSON. BIN: the strata binary (default: built by the test).
set -euo pipefail
cd "$(dirname "$0")/.."
export SOAK_DURATION="${DURATION:-10m}" SOAK_NODES="${NODES:-4}" SOAK_CLIENTS="${CLIENTS:-6}"
export SOAK_FAULT_MIN="${FAULT_MIN:-20s}" SOAK_FAULT_MAX="${FAULT_MAX:-60s}" SOAK_WARMUP="${WARMUP:-60s}" SOAK_SETTLE="${SETTLE:-5m}"
export SOAK_CHECKPOINT="${CHECKPOINT:-0}" SOAK_NETWORK="${NETWORK:-auto}" SOAK_LINK_RATE="${LINK_RATE:-1gbit}" SOAK_FAULTS="${FAULTS:-}"
[ -n "${SEED:-}" ] && export SOAK_SEED="$SEED"
[ -n "${BIN:-}" ] && export BIN="$(realpath "$BIN")"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
go test -tags e2e -count=1 -timeout 0 -run '^TestE2ESoak$' -v ./internal/soak 2>&1 | tee "$log" || status=$?
grep '^SOAK_REPORT ' "$log" | tail -1 | sed 's/^SOAK_REPORT //' || true
exit "$status"
