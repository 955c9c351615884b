#!/bin/sh
# run_all.sh: what `make test` runs after building. Starts a throwaway
# MariaDB and ZooKeeper on free loopback ports, runs every unit test (plain,
# then under ASan + UBSan) and every black-box test, and stops what it
# started, whatever happens.
#   UNIT_ONLY=asan   only the ASan/UBSan unit tests (make check-asan)
#   UNIT_ONLY=tsan   only the ThreadSanitizer unit tests (make check-tsan)
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/leafd-test-XXXXXX)
log=$tmp/all.log
cleanup() {
    sh tests/lib/mariadb.sh stop "$tmp/mariadb" >/dev/null 2>&1
    bash tests/lib/zookeeper.sh stop "$tmp/zk" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# make test starts every server a suite needs, so nothing may skip here:
# CI=1 makes a suite that cannot find its server fail (unless CI is set).
CI=${CI:-1}
export CI

# A server that cannot start fails the whole run, before any test.
no_server() {
    echo "== SOME TESTS FAILED: cannot start $1 (sh .ci/deps.sh test installs it)"
    echo "tests: 0 passed, 1 failed"
    exit 1
}
echo "== starting a throwaway MariaDB and ZooKeeper in $tmp"
sh tests/lib/mariadb.sh start "$tmp/mariadb" >/dev/null || no_server MariaDB
bash tests/lib/zookeeper.sh start "$tmp/zk" >/dev/null || no_server ZooKeeper
MYSQL_PORT="" MYSQL_URL="" ZK_ADDRESS=""
[ -f "$tmp/mariadb/env" ] && . "$tmp/mariadb/env"
[ -f "$tmp/zk/env" ] && . "$tmp/zk/env"
[ -n "$MYSQL_PORT" ] && [ -n "$MYSQL_URL" ] || no_server "MariaDB (no port in $tmp/mariadb/env)"
[ -n "$ZK_ADDRESS" ] || no_server "ZooKeeper (no address in $tmp/zk/env)"
export LEAFD_TEST_MYSQL_URL="$MYSQL_URL" LEAFD_TEST_MYSQL_PORT="$MYSQL_PORT"
export LEAFD_TEST_MYSQL_DIR="$tmp/mariadb" LEAFD_TEST_ZK="$ZK_ADDRESS"
export LEAFD_TEST_ZK_DIR="$tmp/zk"
echo "   MariaDB on 127.0.0.1:$MYSQL_PORT, ZooKeeper on $ZK_ADDRESS"

# Each step's output also goes to $log, for the totals at the end. POSIX sh
# has no pipefail: the step's exit status goes through a file.
step() {
    ( "$@"; echo $? >"$tmp/rc" ) 2>&1 | tee -a "$log"
    [ "$(cat "$tmp/rc")" = 0 ]
}

status=0
: >"$log"
if [ -z "${UNIT_ONLY:-}" ]; then
    step sh tests/lib/run_unit.sh build/tests/check_* || status=1
fi
if [ "${UNIT_ONLY:-}" != tsan ]; then
    step env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
        sh tests/lib/run_unit.sh build/asan/tests/check_* || status=1
fi
if [ "${UNIT_ONLY:-}" != asan ]; then
    # The racing suites under ThreadSanitizer: any report fails the suite.
    step env TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4" \
        sh tests/lib/run_unit.sh build/tsan/tests/check_* || status=1
fi
if [ -z "${UNIT_ONLY:-}" ]; then
    echo "== make lint (cppcheck)"
    step sh -c 'make --no-print-directory lint && echo "lint: clean"' || status=1
    step python3 tests/blackbox/blackbox.py || status=1
    echo "== chaos run, short version (make chaos for the long one)"
    step python3 tests/blackbox/chaos.py --short || status=1
    echo "== fuzzing each libFuzzer target for ${FUZZ_SECONDS:-30} s"
    step sh -c 'make --no-print-directory fuzz >/dev/null && sh fuzz/run.sh' || status=1
    echo "== docker-compose.yml"
    step sh -c 'docker-compose -f docker-compose.yml config -q && echo "docker-compose.yml is valid"' || status=1
fi
# Totals: check's "Checks: N, Failures: F, Errors: E" lines and the
# black-box runner's "N passed, N failed".
# A failed step without a count of its own (a fuzzer crash, the compose
# file) counts as one failure.
if [ $status -eq 0 ]; then echo "== all tests passed"; else echo "== SOME TESTS FAILED"; fi
awk -v status=$status '
/^[0-9]+%: Checks: / { gsub(",", ""); n += $3; f += $5 + $7 }
/^[0-9]+ passed, [0-9]+ failed$/ { n += $1 + $3; f += $3 }
END { if (status && !f) { f = 1; n++ }
      printf "tests: %d passed, %d failed\n", n - f, f }' "$log"
exit $status
