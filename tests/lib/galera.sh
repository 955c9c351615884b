#!/bin/sh
# galera.sh: a throwaway 3-node MariaDB Galera cluster for leafd's tests.
#
#   tests/lib/galera.sh start DIR          a new cluster in DIR/n0 n1 n2
#   tests/lib/galera.sh stop DIR           stop every node (TERM, wait, KILL)
#   tests/lib/galera.sh node-start DIR I   start node I again: it joins the
#                                          cluster (IST, or rsync SST)
#   tests/lib/galera.sh node-stop DIR I    stop node I (TERM, wait, KILL)
#   tests/lib/galera.sh node-kill DIR I    kill -9 node I
#   tests/lib/galera.sh bootstrap DIR I    node I, running but non-Primary,
#                                          makes itself the Primary component
#   tests/lib/galera.sh sql DIR I STMT     run STMT on node I (its socket)
#   tests/lib/galera.sh status DIR I       "<wsrep_cluster_status> <local_state>"
#
# Where the nodes run: GALERA_NETNS="NS0 NS1 NS2" (network namespaces, made
# by the caller) and GALERA_ADDRS="A0 A1 A2" (an address of each namespace):
# node I runs as `ip netns exec NSi mariadbd`, listens on Ai:3306 and talks
# Galera on Ai:4567 (IST 4568, rsync SST 4444). Without GALERA_NETNS every
# node runs here on 127.0.0.1 on ports GALERA_PORT_BASE + 4*I .. +3
# (default: 22000 + 40 * ($$ % 25), inside the 22000-22999 range this
# helper's tests use).
#
# start prints, and writes to DIR/env:
#   GALERA_URL0=mysql://root@A0:P0/leaf   (and 1, 2)
# Every node has database `leaf` with sql/mysql.sql (loaded on n0 before the
# others joined, so they got it by SST), user root@'%' without a password,
# binlog_format=ROW, wsrep_provider=/usr/lib/galera/libgalera_smm.so,
# wsrep_sst_method=rsync, and short failure detection (a node silent for
# about 3 s is evicted). Logs: DIR/nI/mariadbd.log. Data and sockets stay in
# DIR; nothing outside DIR is written. DIR and DIR/nI are made mode 755 and
# DIR/nI/data owned by nobody (rsync SST's daemon runs as nobody). Runs as root on Debian 12 with
# mariadb-server, galera-4 and rsync; POSIX sh.

PATH=$PATH:/usr/sbin:/sbin
GALERA_PROVIDER=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}

galera_log() {
    echo "galera.sh: $*" >&2
}

galera_root() {
    if [ -n "${LEAFD_ROOT:-}" ]; then
        echo "$LEAFD_ROOT"
    elif [ -f "$(dirname "$0")/../../sql/mysql.sql" ]; then
        (cd "$(dirname "$0")/../.." && pwd)
    else
        pwd
    fi
}

# Read DIR/nI/node into NS ADDR PORT GPORT IPORT SPORT.
galera_node() {
    nd=$1/n$2
    if [ ! -f "$nd/node" ]; then
        galera_log "no node $2 in $1"
        return 1
    fi
    . "$nd/node"
}

galera_running() {
    [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null
}

galera_sql() {
    d=$1
    i=$2
    shift 2
    mariadb --no-defaults --socket="$d/n$i/sock" --user=root \
        --connect-timeout=5 -N -B -e "$*"
}

galera_status() {
    mariadb --no-defaults --socket="$1/n$2/sock" --user=root \
        --connect-timeout=2 -N -B -e "SELECT
        (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
          WHERE VARIABLE_NAME='WSREP_CLUSTER_STATUS'),
        (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
          WHERE VARIABLE_NAME='WSREP_LOCAL_STATE')" 2>/dev/null
}

# Launch node I of DIR (extra mariadbd options after) and wait, up to
# GALERA_WAIT_S (default 120) seconds, until it is Synced in a Primary
# component.
galera_launch() {
    d=$1
    i=$2
    shift 2
    galera_node "$d" "$i" || return 1
    nd=$d/n$i
    if galera_running "$nd"; then
        galera_log "node $i already running"
        return 0
    fi
    prefix=
    [ -n "$NS" ] && prefix="ip netns exec $NS"
    opts="gmcast.listen_addr=tcp://$ADDR:$GPORT;ist.recv_addr=$ADDR:$IPORT"
    opts="$opts;evs.inactive_check_period=PT0.5S;evs.suspect_timeout=PT2S"
    opts="$opts;evs.inactive_timeout=PT3S;evs.install_timeout=PT3S"
    opts="$opts;evs.keepalive_period=PT0.5S;gcache.size=64M"
    mkdir -p "$nd/tmp" "$nd/data"
    rm -f "$nd/pid"
    # The joiner's side of an rsync SST is an rsync daemon, which as root
    # drops to user nobody and writes in place: nobody must own the data
    # (mariadbd, as root, does not mind), and reach it.
    chmod 755 "$d" "$nd"
    chown -R nobody "$nd/data"
    # A session of its own, as in mariadb.sh: the server outlives the
    # caller's process group.
    $prefix setsid mariadbd --no-defaults --user=root --datadir="$nd/data" \
        --tmpdir="$nd/tmp" --socket="$nd/sock" --port="$PORT" \
        --bind-address="$ADDR" --skip-name-resolve --pid-file="$nd/pid" \
        --innodb-buffer-pool-size=32M --max-connections=200 \
        --innodb-flush-log-at-trx-commit=2 --innodb-autoinc-lock-mode=2 \
        --binlog-format=ROW --default-storage-engine=InnoDB \
        --wsrep-on=ON --wsrep-provider="$GALERA_PROVIDER" \
        --wsrep-cluster-name=leafd-galera \
        --wsrep-cluster-address="gcomm://$(cat "$d/cluster")" \
        --wsrep-node-name="n$i" --wsrep-node-address="$ADDR:$GPORT" \
        --wsrep-sst-method=rsync --wsrep-sst-receive-address="$ADDR:$SPORT" \
        --wsrep-provider-options="$opts" "$@" \
        >>"$nd/mariadbd.log" 2>&1 </dev/null &
    launched=$!
    n=0
    lim=$((${GALERA_WAIT_S:-120} * 10))
    while [ $n -lt "$lim" ]; do
        st=$(galera_status "$d" "$i")
        if [ "$st" = "Primary	4" ] && galera_running "$nd"; then
            return 0
        fi
        if ! kill -0 "$launched" 2>/dev/null && ! galera_running "$nd"; then
            galera_log "node $i exited; end of $nd/mariadbd.log:"
            tail -n 20 "$nd/mariadbd.log" >&2
            return 1
        fi
        sleep 0.1
        n=$((n + 1))
    done
    galera_log "node $i not Synced within ${GALERA_WAIT_S:-120} s ($st);" \
        "see $nd/mariadbd.log"
    return 1
}

galera_start() {
    d=${1:?usage: galera_start DIR}
    mkdir -p "$d" || return 1
    d=$(cd "$d" && pwd)
    if [ ${#d} -gt 90 ]; then
        galera_log "$d is too long for a unix socket path"
        return 1
    fi
    set -- ${GALERA_NETNS:-}
    ns0=${1:-} ns1=${2:-} ns2=${3:-}
    set -- ${GALERA_ADDRS:-}
    a0=${1:-127.0.0.1} a1=${2:-127.0.0.1} a2=${3:-127.0.0.1}
    base=${GALERA_PORT_BASE:-$((22000 + 40 * ($$ % 25)))}
    cluster=
    for i in 0 1 2; do
        eval "ns=\$ns$i addr=\$a$i"
        if [ -n "$ns" ]; then
            p=3306 g=4567 ip=4568 sp=4444
        else
            p=$((base + 4 * i)) g=$((base + 4 * i + 1))
            ip=$((base + 4 * i + 2)) sp=$((base + 4 * i + 3))
        fi
        mkdir -p "$d/n$i/tmp"
        printf 'NS=%s\nADDR=%s\nPORT=%s\nGPORT=%s\nIPORT=%s\nSPORT=%s\n' \
            "$ns" "$addr" "$p" "$g" "$ip" "$sp" >"$d/n$i/node"
        cluster="$cluster${cluster:+,}$addr:$g"
        if [ ! -d "$d/n$i/data/mysql" ] &&
           ! mariadb-install-db --no-defaults --datadir="$d/n$i/data" \
                --tmpdir="$d/n$i/tmp" --user=root \
                --auth-root-authentication-method=normal \
                --skip-test-db >"$d/n$i/install.log" 2>&1; then
            galera_log "mariadb-install-db failed; see $d/n$i/install.log"
            return 1
        fi
    done
    echo "$cluster" >"$d/cluster"
    galera_launch "$d" 0 --wsrep-new-cluster || return 1
    if ! galera_sql "$d" 0 "
            CREATE USER IF NOT EXISTS 'root'@'%';
            GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
            CREATE DATABASE IF NOT EXISTS leaf DEFAULT CHARACTER SET utf8mb4;" ||
       ! mariadb --no-defaults --socket="$d/n0/sock" --user=root leaf \
            <"$(galera_root)/sql/mysql.sql"; then
        galera_log "cannot create database leaf"
        return 1
    fi
    galera_launch "$d" 1 || return 1
    galera_launch "$d" 2 || return 1
    : >"$d/env"
    for i in 0 1 2; do
        galera_node "$d" "$i"
        echo "GALERA_URL$i=mysql://root@$ADDR:$PORT/leaf" >>"$d/env"
    done
    cat "$d/env"
}

galera_node_stop() {
    nd=$1/n$2
    galera_running "$nd" || { rm -f "$nd/pid"; return 0; }
    pid=$(cat "$nd/pid")
    kill -TERM "$pid" 2>/dev/null
    n=0
    while [ $n -lt 300 ] && kill -0 "$pid" 2>/dev/null; do
        sleep 0.1
        n=$((n + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        galera_log "node $2 ($pid) ignored TERM for 30 s; killing"
        kill -KILL "$pid" 2>/dev/null
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f "$nd/pid"
}

galera_node_kill() {
    nd=$1/n$2
    if galera_running "$nd"; then
        pid=$(cat "$nd/pid")
        kill -KILL "$pid" 2>/dev/null
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    fi
    rm -f "$nd/pid"
}

galera_stop() {
    d=${1:?usage: galera_stop DIR}
    rc=0
    for i in 2 1 0; do
        [ -d "$d/n$i" ] && { galera_node_stop "$d" "$i" || rc=1; }
    done
    return $rc
}

case "$0" in
*galera.sh)
    set -u
    cmd=${1:-}
    case "$cmd" in
    start) [ $# -eq 2 ] && { galera_start "$2"; exit $?; } ;;
    stop) [ $# -eq 2 ] && { galera_stop "$2"; exit $?; } ;;
    node-start) [ $# -eq 3 ] && { galera_launch "$2" "$3"; exit $?; } ;;
    node-stop) [ $# -eq 3 ] && { galera_node_stop "$2" "$3"; exit $?; } ;;
    node-kill) [ $# -eq 3 ] && { galera_node_kill "$2" "$3"; exit $?; } ;;
    bootstrap)
        [ $# -eq 3 ] && {
            galera_sql "$2" "$3" \
                "SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'"
            exit $?
        } ;;
    sql) [ $# -eq 4 ] && { galera_sql "$2" "$3" "$4"; exit $?; } ;;
    status) [ $# -eq 3 ] && { galera_status "$2" "$3"; exit $?; } ;;
    esac
    echo "usage: $0 start|stop DIR | node-start|node-stop|node-kill|bootstrap|status DIR I | sql DIR I STMT" >&2
    exit 2
    ;;
esac
