#!/usr/bin/env bash
# Runs go test over the given packages, keeps the full verbose log in $1,
# and prints a line per package as it finishes (with its time), the lines
# tests address to the reader (chaos:, bench:), each failing leaf test with
# the lines it printed itself, and a closing "N passed, N failed, N
# skipped" (scripts/testsummary) over every workspace.
#
#   scripts/gotest.sh LOG FLAGS... -- PACKAGES...
#
# The packages are those of the root workspace (go.work). Each directory in
# GOTEST_WORKSPACES holds a workspace of its own (modules whose
# dependencies cannot share the root's build list, see go.work): its
# own modules' packages (every module of that go.work but this
# repository's root module, which the root workspace tests) are tested with
# the same flags, by one more
# go test run whose events join the same summary.
set -uo pipefail
log=$1; shift
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
[ $# -gt 0 ] && shift
pkgs=("$@")
read -r -a extra <<< "${GOTEST_WORKSPACES:-}"
go build -o .tmp/testsummary ./scripts/testsummary || exit 2
rcs=$(mktemp)
trap 'rm -f "$rcs"' EXIT
echo "go test ${flags[*]} ${pkgs[*]}${extra:+ (and the own modules of the workspaces ${extra[*]})}: building, then a line per package as it finishes (full log: $log)"
{
  go test -json "${flags[@]}" "${pkgs[@]}"; echo $? >> "$rcs"
  for d in "${extra[@]}"; do
    own=$(go -C "$d" list -m -f '{{if ne .Dir "'"$PWD"'"}}{{.Path}}/...{{end}}')
    # shellcheck disable=SC2086 # one pattern a line
    go -C "$d" test -json "${flags[@]}" $own; echo $? >> "$rcs"
  done
} 2>&1 | .tmp/testsummary "$log"
sum=${PIPESTATUS[1]}
# go test's own status counts too (a build failure prints no event).
while read -r rc; do [ "$rc" -ne 0 ] && exit "$rc"; done < "$rcs"
exit "$sum"
