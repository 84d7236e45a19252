#!/usr/bin/env bash
# scripts/bench-traces.sh against a stub `pacer` that answers `simulate` with
# a fixed summary row: paths relative to the caller's directory work, and a
# folder holding none of the traces fails instead of printing totals of 0.
#   bench_traces_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/caller/traces/itp" "$tmp/caller/bin"
# The summary row's columns: policy, met/all, ratio, admitted, rejected, late.
cat >"$tmp/caller/bin/pacer" <<STUB
#!/bin/sh
echo "\$*" >>"$tmp/calls"
echo "pacer  7/10  0.700  9  1  2"
STUB
chmod +x "$tmp/caller/bin/pacer"
: >"$tmp/caller/traces/itp/cluster10.csv"

# Relative folder and binary, from a directory other than the repository's.
(cd "$tmp/caller" && "$src/scripts/bench-traces.sh" traces bin/pacer) >"$tmp/out" 2>&1 ||
  { cat "$tmp/out" >&2; fail "exited non-zero with one trace present"; }
# cluster10 is two pairs (256 and 32 GPUs): both ran, the rest skipped.
[ "$(wc -l <"$tmp/calls")" -eq 2 ] || fail "ran $(wc -l <"$tmp/calls") simulations, want 2"
grep -q "| itp/cluster10 | 256 | 7/10 | 0.700 | 2 |" "$tmp/out" || fail "no row: $(cat "$tmp/out")"
grep -q "total: 14 deadlines met, 4 admitted jobs late (2 of" "$tmp/out" ||
  fail "totals: $(grep total "$tmp/out")"

# A folder without any of the traces: an error, not totals of nothing.
mkdir -p "$tmp/caller/empty"
if (cd "$tmp/caller" && "$src/scripts/bench-traces.sh" empty bin/pacer) >"$tmp/out" 2>&1; then
  fail "exited 0 with no trace found: $(cat "$tmp/out")"
fi
grep -q "no trace found under" "$tmp/out" || fail "no reason given: $(cat "$tmp/out")"
echo "PASS: bench-traces.sh reads relative paths and fails when no trace is found"
