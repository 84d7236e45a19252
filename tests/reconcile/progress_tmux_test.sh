#!/usr/bin/env bash
# The live progress line of the real `pacer run` in a real terminal (tmux) of
# 80 and 200 columns: it must never wrap, so that each "\r" redraw replaces it
# and no stale copy is left on screen; on 200 columns it keeps every field.
# Skipped (77) when tmux is not installed (scripts/install-deps.sh installs it).
#   progress_tmux_test.sh PACER_BINARY PACER_WORKER_BINARY SOURCE_DIR
set -euo pipefail
pacer=$1 worker=$2 src=$3
if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: tmux is not installed (apt-get install tmux, or scripts/install-deps.sh)"
  exit 77
fi
tmp=$(mktemp -d)
socket="pacer-progress-$$"
cleanup() { tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The quickstart, shortened to 60 steps: enough redraws, a short test.
sed 's/samples: 2400 .*/samples: 960/' "$src/manifests/examples/quickstart.yaml" >"$tmp/job.yaml"
grep -q 'samples: 960' "$tmp/job.yaml" || fail "could not shorten the quickstart"

for columns in 80 200; do
  dir="$tmp/work-$columns"
  cat >"$tmp/run-$columns.sh" <<RUN
#!/bin/sh
"$pacer" run "$tmp/job.yaml" --worker-binary "$worker" --work-dir "$dir" --cpu-devices 2
echo "EXIT=\$?"
tmux -L "$socket" wait-for -S "done-$columns"
RUN
  chmod +x "$tmp/run-$columns.sh"
  tmux -L "$socket" -f /dev/null new-session -d -s "w$columns" -x "$columns" -y 50 \
    "$tmp/run-$columns.sh; sleep 600"
  tmux -L "$socket" set-option -t "w$columns" history-limit 5000 >/dev/null
  # Returns when the run has ended (the script signals; no polling or sleeps).
  timeout 300 tmux -L "$socket" wait-for "done-$columns" || fail "pacer run did not end in 300 s"
  screen=$(tmux -L "$socket" capture-pane -p -t "w$columns" -S -)
  tmux -L "$socket" kill-session -t "w$columns"
  printf '%s\n' "$screen" >"$tmp/screen-$columns.txt"

  grep -q '^EXIT=0$' <<<"$screen" || fail "$columns columns: pacer run failed:"$'\n'"$screen"
  grep -q 'Succeeded' <<<"$screen" || fail "$columns columns: no summary:"$'\n'"$screen"
  # Exactly one progress line is left: the last one, ended by the summary.
  # A line wider than the terminal wraps, and each redraw leaves its first
  # row behind.
  progress_rows=$(grep -cE '^\[[#-]+\] +[0-9]+%' <<<"$screen" || true)
  [ "$progress_rows" -eq 1 ] ||
    fail "$columns columns: $progress_rows progress rows on screen, want 1 (wrapped or stale):"$'\n'"$screen"
  # No row continues a wrapped progress line (the phase would start a row).
  if grep -qE '^(Running|Succeeded|Planning|replans|ETA|slack)' <<<"$screen"; then
    fail "$columns columns: a wrapped progress line:"$'\n'"$screen"
  fi
  line=$(grep -E '^\[[#-]+\] +[0-9]+%' <<<"$screen")
  [ "${#line}" -lt "$columns" ] || fail "$columns columns: progress line ${#line} wide: $line"
  grep -q 'step 60/60' <<<"$line" || fail "$columns columns: last line not at 60/60: $line"
  if [ "$columns" -eq 200 ]; then
    # Room for everything: even the least useful field (replans) stays.
    for field in 's/step' 'deadline ' 'replans ' 'Succeeded'; do
      grep -qF -- "$field" <<<"$line" || fail "200 columns: '$field' dropped from: $line"
    done
  fi
  echo "$columns columns: $line"
done
echo "PASS: the progress line fits 80 and 200 columns without stale rows"
