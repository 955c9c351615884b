#!/bin/bash
# zookeeper.sh: a throwaway single-node ZooKeeper for tests.
#
#   tests/lib/zookeeper.sh start DIR     start on a free loopback port, wait for it
#   tests/lib/zookeeper.sh stop DIR      stop it (by the PID in DIR/zk.pid)
#   tests/lib/zookeeper.sh restart DIR   stop, then start again on the same port
#
# start prints ZK_PORT=P and ZK_ADDRESS=127.0.0.1:P and writes them to DIR/env
# (source it). The data lives in DIR/data, the server log in DIR/zk.log.
# minSessionTimeout is 2 s so session-expiry tests run quickly. forceSync=no:
# the transaction log is written but not fsynced, which survives a kill -9 of
# the server (what the tests do), not a crash of the machine; fsync stalls on
# a busy machine made writes outlast session and fence timeouts.
set -u

CP=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
MAIN=org.apache.zookeeper.server.ZooKeeperServerMain

die() { echo "zookeeper.sh: $*" >&2; exit 1; }

# A port nobody listens on, never 8080.
free_port() {
    local p i
    if command -v python3 >/dev/null 2>&1; then
        for i in 1 2 3 4 5; do
            # below the ephemeral range (32768-60999): the JVM binds it
            # seconds later, and an outgoing connection took a kernel-picked
            # port meanwhile ("Address already in use")
            p=$(python3 "$(dirname "$0")/free_port.py")
            [ -n "$p" ] && { echo "$p"; return 0; }
        done
    fi
    for i in $(seq 1 200); do
        p=$((20000 + RANDOM % 40000))
        [ "$p" = 8080 ] && continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"; return 0
        fi
    done
    return 1
}

# Ask the server "srvr"; print its answer (empty if it is not up).
srvr() {
    local port=$1
    (
        exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
        printf 'srvr' >&3
        timeout 2 cat <&3
    ) 2>/dev/null
}

is_running() {
    local dir=$1 pid
    [ -f "$dir/zk.pid" ] || return 1
    pid=$(cat "$dir/zk.pid")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

start() {
    local dir=$1 port="" i
    mkdir -p "$dir/data" || die "cannot create $dir/data"
    dir=$(cd "$dir" && pwd)
    is_running "$dir" && die "already running (pid $(cat "$dir/zk.pid"))"
    for jar in ${CP//:/ }; do
        [ -f "$jar" ] || die "missing $jar (apt-get install zookeeper libslf4j-java)"
    done
    command -v java >/dev/null || die "java not found"
    # restart keeps the port so clients can reconnect to the same address
    if [ -f "$dir/env" ]; then
        port=$(sed -n 's/^ZK_PORT=//p' "$dir/env")
    fi
    [ -n "$port" ] || port=$(free_port) || die "no free port"
    cat >"$dir/zoo.cfg" <<EOF
tickTime=1000
minSessionTimeout=2000
maxSessionTimeout=60000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
maxClientCnxns=0
forceSync=no
EOF
    # own session: outlives a caller whose process group gets killed (check)
    setsid nohup java -Xmx256m -Dzookeeper.jmx.log4j.disable=true -cp "$CP" $MAIN "$dir/zoo.cfg" \
        >"$dir/zk.log" 2>&1 </dev/null &
    echo $! >"$dir/zk.pid"
    for i in $(seq 1 300); do
        if srvr "$port" | grep -q '^Mode:'; then
            printf 'ZK_PORT=%s\nZK_ADDRESS=127.0.0.1:%s\n' "$port" "$port" | tee "$dir/env"
            return 0
        fi
        is_running "$dir" || { tail -20 "$dir/zk.log" >&2; die "server exited"; }
        sleep 0.1
    done
    tail -20 "$dir/zk.log" >&2
    stop "$dir"
    die "not up after 30 s"
}

stop() {
    local dir=$1 pid i
    [ -f "$dir/zk.pid" ] || return 0
    pid=$(cat "$dir/zk.pid")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for i in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$dir/zk.pid"
}

[ $# -eq 2 ] || die "usage: $0 start|stop|restart DIR"
case $1 in
start) start "$2" ;;
stop) stop "$2" ;;
restart) stop "$2"; start "$2" ;;
*) die "usage: $0 start|stop|restart DIR" ;;
esac
