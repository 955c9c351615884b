#!/bin/sh
# mariadb.sh: a throwaway MariaDB for leafd's tests.
#
#   tests/lib/mariadb.sh start DIR     new server in DIR (or the one already there)
#   tests/lib/mariadb.sh stop DIR      stop it (TERM, wait, then KILL)
#   tests/lib/mariadb.sh restart DIR   stop and start again: same port, same data
#
# start prints, and writes to DIR/env, two lines:
#   MYSQL_PORT=P
#   MYSQL_URL=mysql://root@127.0.0.1:P/leaf
# The server listens on 127.0.0.1:P (a free port in 20000-32767) and on DIR/sock,
# has database `leaf` with sql/mysql.sql loaded, logs to DIR/mariadbd.log, and
# keeps its temporary files in DIR/tmp. Words in DIR/args (if any) are more
# mariadbd options, e.g. --ssl-cert=... (no spaces in them).
# MARIADB_BIND=ADDR (default 127.0.0.1): listen on ADDR instead, e.g. 0.0.0.0
# inside a test's network namespace (tests/lib/netns.py); then root may also
# connect over TCP from any address, without a password, and the printed URL
# names ADDR (127.0.0.1 for 0.0.0.0). A port written to DIR/port beforehand
# is used as it is.
#
# Sourced (". tests/lib/mariadb.sh"), it only defines mariadb_start, mariadb_stop
# and mariadb_restart; mariadb_start also exports MYSQL_PORT and MYSQL_URL.
# Runs as root on Debian 12 with the mariadb-server package; POSIX sh.

PATH=$PATH:/usr/sbin:/sbin

# Where sql/mysql.sql lives: LEAFD_ROOT, else next to this script, else ".".
mariadb_root() {
    if [ -n "${LEAFD_ROOT:-}" ]; then
        echo "$LEAFD_ROOT"
    elif [ -f "$(dirname "$0")/../../sql/mysql.sql" ]; then
        (cd "$(dirname "$0")/../.." && pwd)
    else
        pwd
    fi
}

mariadb_log() {
    echo "mariadb.sh: $*" >&2
}

# A free loopback TCP port in 20000-32767: below the kernel's ephemeral range
# (32768-60999), so that no outgoing connection takes it while
# mariadb-install-db runs; above the ranges blackbox.py -j hands out.
mariadb_free_port() {
    fp=$(mariadb_root)/tests/lib/free_port.py
    if command -v python3 >/dev/null 2>&1 && [ -f "$fp" ]; then
        python3 "$fp"
        return
    fi
    p=$((20000 + $$ % 20000))
    while [ "$p" -lt 65000 ]; do
        if ! grep -qi ":$(printf '%04X' "$p") " /proc/net/tcp \
                /proc/net/tcp6 2>/dev/null; then
            echo "$p"
            return
        fi
        p=$((p + 1))
    done
}

mariadb_running() {
    [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null
}

mariadb_client() {
    dir=$1
    shift
    mariadb --no-defaults --socket="$dir/sock" --user=root \
        --connect-timeout=5 "$@"
}

# Start mariadbd in the background on DIR's port and wait for it.
mariadb_launch() {
    dir=$1
    port=$(cat "$dir/port")
    # A session of its own: test harnesses (check's forked tests, python)
    # kill their process group when done, and the server must outlive them.
    # innodb-flush-log-at-trx-commit=2: a commit is written to the OS at
    # once but not fsynced, so it survives a kill -9 of mariadbd (what the
    # tests do), not a crash of the machine; on a busy machine with many
    # servers, fsync stalls made commits outlast clients' 3 s timeouts.
    mkdir -p "$dir/tmp"
    setsid mariadbd --no-defaults --user=root --datadir="$dir/data" \
        --tmpdir="$dir/tmp" \
        --socket="$dir/sock" --port="$port" --bind-address="${MARIADB_BIND:-127.0.0.1}" \
        --skip-name-resolve --pid-file="$dir/pid" \
        --innodb-buffer-pool-size=32M --max-connections=200 \
        --innodb-flush-log-at-trx-commit=2 $(cat "$dir/args" 2>/dev/null) \
        >>"$dir/mariadbd.log" 2>&1 </dev/null &
    launched=$!
    i=0
    while [ $i -lt 300 ]; do
        if mariadb-admin --no-defaults --socket="$dir/sock" --user=root \
                --connect-timeout=2 ping >/dev/null 2>&1 &&
           mariadb_running "$dir"; then
            return 0
        fi
        if ! kill -0 "$launched" 2>/dev/null && ! mariadb_running "$dir"; then
            mariadb_log "mariadbd exited; end of $dir/mariadbd.log:"
            tail -n 20 "$dir/mariadbd.log" >&2
            return 1
        fi
        sleep 0.1
        i=$((i + 1))
    done
    mariadb_log "mariadbd did not answer ping within 30 s; see $dir/mariadbd.log"
    kill -KILL "$launched" 2>/dev/null
    [ -f "$dir/pid" ] && kill -KILL "$(cat "$dir/pid")" 2>/dev/null
    rm -f "$dir/pid"
    return 1
}

# With MARIADB_BIND other than loopback: root from any address (a private
# test network only).
mariadb_remote_root() {
    case "${MARIADB_BIND:-127.0.0.1}" in
    127.0.0.1) ;;
    *) echo "CREATE USER IF NOT EXISTS 'root'@'%';
             GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;" ;;
    esac
}

mariadb_start() {
    dir=${1:?usage: mariadb_start DIR}
    mkdir -p "$dir/tmp" || return 1
    dir=$(cd "$dir" && pwd)
    if [ ${#dir} -gt 100 ]; then
        mariadb_log "$dir is too long for a unix socket path"
        return 1
    fi
    if mariadb_running "$dir"; then
        mariadb_log "already running in $dir"
    else
        chosen=0
        if [ ! -f "$dir/port" ]; then
            port=$(mariadb_free_port)
            if [ -z "$port" ]; then
                mariadb_log "no free port"
                return 1
            fi
            echo "$port" >"$dir/port"
            chosen=1
        fi
        if [ ! -d "$dir/data/mysql" ]; then
            # A temporary directory of its own: servers that share /tmp
            # name their temporary tables by PID, and two at once (PID
            # namespaces, parallel tests) can collide ("Unknown table
            # 'mysql.tmp_user_sys'").
            mkdir -p "$dir/tmp"
            if ! mariadb-install-db --no-defaults --datadir="$dir/data" \
                    --tmpdir="$dir/tmp" \
                    --user=root --auth-root-authentication-method=normal \
                    --skip-test-db >"$dir/install.log" 2>&1; then
                mariadb_log "mariadb-install-db failed; see $dir/install.log:"
                tail -n 20 "$dir/install.log" >&2
                return 1
            fi
            fresh=1
        else
            fresh=0
        fi
        # A port found free can be taken by another process before mariadbd
        # binds it (tests run side by side): a port this call chose is
        # chosen again, up to 5 times.
        tries=1
        until mariadb_launch "$dir"; do
            if [ "$chosen" = 1 ] && [ $tries -lt 5 ] &&
               tail -n 20 "$dir/mariadbd.log" | grep -q "Address already in use"; then
                port=$(mariadb_free_port)
                [ -n "$port" ] || return 1
                echo "$port" >"$dir/port"
                mariadb_log "port taken meanwhile; trying port $port"
                tries=$((tries + 1))
                continue
            fi
            return 1
        done
        if [ "$fresh" = 1 ]; then
            # skip-name-resolve: TCP clients are matched by address, and the
            # install only made root@localhost (the socket).
            if ! mariadb_client "$dir" -e "
                CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
                GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
                $(mariadb_remote_root)
                CREATE DATABASE IF NOT EXISTS leaf DEFAULT CHARACTER SET utf8mb4;" ||
               ! mariadb_client "$dir" leaf <"$(mariadb_root)/sql/mysql.sql"; then
                mariadb_log "cannot create database leaf"
                return 1
            fi
        fi
    fi
    port=$(cat "$dir/port")
    MYSQL_PORT=$port
    host=${MARIADB_BIND:-127.0.0.1}
    [ "$host" = 0.0.0.0 ] && host=127.0.0.1
    MYSQL_URL=mysql://root@$host:$port/leaf
    export MYSQL_PORT MYSQL_URL
    printf 'MYSQL_PORT=%s\nMYSQL_URL=%s\n' "$MYSQL_PORT" "$MYSQL_URL" >"$dir/env"
    cat "$dir/env"
}

mariadb_stop() {
    dir=${1:?usage: mariadb_stop DIR}
    if ! mariadb_running "$dir"; then
        rm -f "$dir/pid"
        return 0
    fi
    pid=$(cat "$dir/pid")
    kill -TERM "$pid" 2>/dev/null
    i=0
    while [ $i -lt 300 ] && kill -0 "$pid" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        mariadb_log "mariadbd $pid ignored TERM for 30 s; killing"
        kill -KILL "$pid" 2>/dev/null
        while kill -0 "$pid" 2>/dev/null; do
            sleep 0.1
        done
    fi
    rm -f "$dir/pid"
    return 0
}

mariadb_restart() {
    dir=${1:?usage: mariadb_restart DIR}
    if [ ! -f "$dir/port" ] || [ ! -d "$dir/data/mysql" ]; then
        mariadb_log "no server was started in $dir"
        return 1
    fi
    mariadb_stop "$dir" && mariadb_start "$dir"
}

case "$0" in
*mariadb.sh)
    set -u
    if [ $# -ne 2 ]; then
        echo "usage: $0 start|stop|restart DIR" >&2
        exit 2
    fi
    case "$1" in
    start) mariadb_start "$2" ;;
    stop) mariadb_stop "$2" ;;
    restart) mariadb_restart "$2" ;;
    *)
        echo "usage: $0 start|stop|restart DIR" >&2
        exit 2
        ;;
    esac
    exit $?
    ;;
esac
