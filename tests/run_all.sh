#!/bin/sh
# run_all.sh: what `make test` runs after building. Starts a throwaway
# MariaDB and ZooKeeper on free loopback ports, runs every unit test (plain,
# then under ASan + UBSan) and every black-box test, and stops what it
# started, whatever happens.
#   UNIT_ONLY=asan   only the ASan/UBSan unit tests (make check-asan)
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/leafd-test-XXXXXX)
cleanup() {
    sh tests/mariadb.sh stop "$tmp/mariadb" >/dev/null 2>&1
    bash tests/zookeeper.sh stop "$tmp/zk" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== starting a throwaway MariaDB and ZooKeeper in $tmp"
sh tests/mariadb.sh start "$tmp/mariadb" >/dev/null || { echo "cannot start MariaDB"; exit 1; }
bash tests/zookeeper.sh start "$tmp/zk" >/dev/null || { echo "cannot start ZooKeeper"; exit 1; }
. "$tmp/mariadb/env"
. "$tmp/zk/env"
export LEAFD_TEST_MYSQL_URL="$MYSQL_URL" LEAFD_TEST_MYSQL_PORT="$MYSQL_PORT"
export LEAFD_TEST_MYSQL_DIR="$tmp/mariadb" LEAFD_TEST_ZK="$ZK_ADDRESS"
export LEAFD_TEST_ZK_DIR="$tmp/zk"
echo "   MariaDB on 127.0.0.1:$MYSQL_PORT, ZooKeeper on $ZK_ADDRESS"

status=0
if [ "${UNIT_ONLY:-}" != asan ]; then
    sh tests/run_unit.sh build/tests/check_* || status=1
fi
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    sh tests/run_unit.sh build/asan/tests/check_* || status=1
if [ "${UNIT_ONLY:-}" != asan ]; then
    python3 tests/blackbox.py || status=1
    echo "== fuzzing each libFuzzer target for ${FUZZ_SECONDS:-60} s"
    make --no-print-directory fuzz >/dev/null && sh fuzz/run.sh || status=1
    echo "== docker-compose.yml"
    docker-compose -f docker-compose.yml config -q && echo "docker-compose.yml is valid" || status=1
fi
if [ $status -eq 0 ]; then echo "== all tests passed"; else echo "== SOME TESTS FAILED"; fi
exit $status
