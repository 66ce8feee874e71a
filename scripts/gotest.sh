#!/usr/bin/env bash
# Runs go test once over the given packages, keeps the full verbose log in
# $1, and prints a line per package as it finishes (with its time), the
# lines tests address to the reader (chaos:, bench:), each failing leaf
# test with the lines it printed itself, and a closing "N passed, N
# failed, N skipped" (scripts/testsummary).
set -uo pipefail
log=$1; shift
go build -o .tmp/testsummary ./scripts/testsummary || exit 2
echo "go test $*: building, then a line per package as it finishes (full log: $log)"
go test -json "$@" 2>&1 | .tmp/testsummary "$log"
rc=("${PIPESTATUS[@]}")
# go test's own status counts too (a build failure prints no event).
[ "${rc[0]}" -ne 0 ] && exit "${rc[0]}"
exit "${rc[1]}"
