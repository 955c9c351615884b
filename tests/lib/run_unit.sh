#!/bin/sh
# Run check-based unit test binaries; fail if any fails.
# Usage: tests/lib/run_unit.sh build/tests/check_x ...
status=0
for t in "$@"; do
    case "$t" in *.d|*.o) continue ;; esac
    echo "== $t"
    if ! "$t"; then
        echo "FAILED: $t"
        status=1
    fi
done
exit $status
