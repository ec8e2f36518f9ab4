#!/usr/bin/env bash
# Runs a test binary under oclgrind (an OpenCL device simulator that checks every access):
# data races, out-of-bounds accesses and divergent barriers in the generated kernels. Any report
# fails, as does the binary's own exit status.
#   tests/gpu/oclgrind_check.sh BINARY [ARGS...]
set -u
log=$(mktemp)
trap 'rm -f "$log"' EXIT
oclgrind --data-races --log "$log" "$@"
rc=$?
if [ -s "$log" ]; then
  echo "oclgrind reported:"
  head -100 "$log"
  exit 1
fi
exit $rc
