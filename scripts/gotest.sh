#!/usr/bin/env bash
# Runs go test once over the given packages, keeps the full verbose log in
# $1, prints package results and the lines tests address to the reader
# (chaos:), the failures with their messages, and closes with
# "N passed, N failed, N skipped".
set -uo pipefail
log=$1; shift
go test -v "$@" > "$log" 2>&1
rc=$?
grep -E '^(ok|FAIL|panic:|chaos:|bench:)' "$log" || true
passed=$(grep -cE '^\s*--- PASS' "$log")
failed=$(grep -cE '^\s*--- FAIL' "$log")
skipped=$(grep -cE '^\s*--- SKIP' "$log")
if [ "$skipped" -gt 0 ]; then
  echo "skipped tests:"; grep -E -A3 '^\s*--- SKIP' "$log"
fi
if [ "$failed" -gt 0 ]; then
  echo "failures (full log: $log):"; grep -E -B30 '^\s*--- FAIL' "$log" | head -n 400
elif [ $rc -ne 0 ]; then
  echo "go test exited $rc; the end of $log:"; tail -n 60 "$log"
fi
echo "$passed passed, $failed failed, $skipped skipped"
exit $rc
