#!/usr/bin/env bash
# Runs promtool on the alert rules: `check` (syntax, templates, names) or
# `test` (tests/monitoring/pacer-rules_test.yaml, each alert fires and stays
# quiet in a near miss). Exit 77 (ctest: skipped) when promtool is missing;
# scripts/install-deps.sh installs it with the prometheus package.
set -euo pipefail
mode=$1 file=$2
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool not installed (scripts/install-deps.sh installs prometheus)" >&2
  exit 77
fi
case "$mode" in
  check) exec promtool check rules "$file" ;;
  test) exec promtool test rules "$file" ;;
  *) echo "usage: $0 check|test FILE" >&2; exit 2 ;;
esac
