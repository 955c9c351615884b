#!/bin/sh
# Run check-based unit test binaries; fail if any fails. Each suite's time
# follows it ("== check_x: 12s"), for the lanes' table.
# Usage: tests/lib/run_unit.sh build/tests/check_x ...
status=0
for t in "$@"; do
    case "$t" in *.d|*.o) continue ;; esac
    echo "== $t"
    t0=$(date +%s)
    if ! "$t"; then
        echo "FAILED: $t"
        status=1
    fi
    echo "== $t: $(( $(date +%s) - t0 ))s"
done
exit $status
