#!/bin/sh
# Install the Debian packages leafd needs that this machine lacks.
# Usage: sh .ci/deps.sh [build|test|bench|deb]   (default: build)
# A no-op when everything is installed; needs root (or sudo) otherwise.
set -e
profile=${1:-build}
build="gcc make pkg-config libc6-dev libevent-dev default-libmysqlclient-dev
libzookeeper-mt-dev libjansson-dev libsqlite3-dev check curl tzdata libcurl4-openssl-dev
libhiredis-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev libpq-dev"
test="$build mariadb-server mariadb-client zookeeper default-jre-headless python3 nginx
libfaketime procps slowhttptest docker-compose clang libclang-rt-14-dev cppcheck
chromium chromium-driver python3-selenium fonts-liberation
libhiredis-dev redis-server redis-tools redis-sentinel python3-redis python3-yaml
nghttp2-client protobuf-compiler python3-grpcio python3-protobuf python3-pymemcache python3-cryptography
memcached libmemcached-tools openssl debhelper lintian systemd man-db
golang-go golang-google-grpc-dev golang-goprotobuf-dev iproute2 nftables iputils-arping
galera-4 rsync prometheus postgresql-15"
bench="$test nginx wrk"
deb="$build debhelper lintian python3"
case "$profile" in
build) want=$build ;;
test) want=$test ;;
bench) want=$bench ;;
deb) want=$deb ;;
*) echo "deps.sh: unknown profile $profile (build, test, bench or deb)" >&2; exit 2 ;;
esac
missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
# node and npm (the black-box tests' node client): Debian's, unless the
# machine has them from elsewhere (a NodeSource nodejs bundles npm, and
# Debian's npm would conflict with it).
if [ "$profile" = test ] || [ "$profile" = bench ]; then
    command -v node >/dev/null 2>&1 || missing="$missing nodejs"
    command -v npm >/dev/null 2>&1 || missing="$missing npm"
fi
[ -z "$missing" ] && exit 0
echo "leafd: installing missing packages:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# A fresh machine's apt-daily may hold the lock for a while: wait for it.
$SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq
# shellcheck disable=SC2086
$SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends $missing
