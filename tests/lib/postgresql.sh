#!/bin/sh
# postgresql.sh: a throwaway PostgreSQL 15 cluster for leafd's tests.
#
#   tests/lib/postgresql.sh start DIR     new cluster in DIR (or the one already there)
#   tests/lib/postgresql.sh stop DIR      stop it (INT: fast shutdown, wait, then KILL)
#   tests/lib/postgresql.sh restart DIR   stop and start again: same port, same data
#
# start prints, and writes to DIR/env:
#   PG_PORT=P
#   PG_URL=postgresql://leaf:leafpw@127.0.0.1:P/leaf
#   PG_DIR=DIR
# The server runs as the user postgres (it refuses root), listens on
# 127.0.0.1:P (a free port from tests/lib/free_port.py, or DIR/port when
# written beforehand) and on a socket in DIR/run, keeps its data in
# DIR/data and logs to DIR/postgres.log. The cluster has a role leaf
# (password leafpw, owner of database leaf, where sql/postgresql.sql is
# loaded); local socket connections are trusted (psql -h DIR/run -U
# postgres), TCP ones need a password (scram-sha-256). Lines in DIR/conf
# (if any) are appended to postgresql.conf and lines in DIR/hba put first
# in pg_hba.conf before every start (ssl = on, hostssl ... cert).
# fsync is off: a commit is written to the OS before it returns, so it
# survives a kill -9 of the server (what the tests do), not a crash of the
# machine.
#
# Sourced, it only defines pg_start, pg_stop, pg_restart and pg_psql DIR ARGS.
# Runs as root on Debian 12 with postgresql-15; POSIX sh.

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

pg_root() {
    if [ -n "${LEAFD_ROOT:-}" ]; then
        echo "$LEAFD_ROOT"
    elif [ -f "$(dirname "$0")/../../sql/postgresql.sql" ]; then
        (cd "$(dirname "$0")/../.." && pwd)
    else
        pwd
    fi
}

pg_log() {
    echo "postgresql.sh: $*" >&2
}

pg_as() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

pg_running() {
    [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null
}

pg_psql() {
    dir=$1
    shift
    pg_as "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/run" \
        -p "$(cat "$dir/port")" -U postgres "$@"
}

# The user postgres must reach DIR: a directory of the path that others
# cannot enter gets o+x, under /tmp only (a test's mkdtemp is 0700).
pg_reach() {
    d=$1
    while [ "$d" != / ] && [ -n "$d" ]; do
        if ! pg_as test -x "$d" 2>/dev/null; then
            case "$d" in
            /tmp/*) chmod o+x "$d" || return 1 ;;
            *) pg_log "the user postgres cannot enter $d"; return 1 ;;
            esac
        fi
        d=$(dirname "$d")
    done
}

pg_launch() {
    dir=$1
    port=$(cat "$dir/port")
    if [ -f "$dir/conf" ]; then
        cp "$dir/data/postgresql.conf.orig" "$dir/data/postgresql.conf"
        cat "$dir/conf" >>"$dir/data/postgresql.conf"
    fi
    {
        cat "$dir/hba" 2>/dev/null
        echo "local all all trust"
        echo "host all all 127.0.0.1/32 scram-sha-256"
        echo "host all all 0.0.0.0/0 scram-sha-256"
        echo "local replication all trust"
        echo "host replication all 0.0.0.0/0 scram-sha-256"
    } >"$dir/data/pg_hba.conf"
    chown postgres "$dir/data/pg_hba.conf" "$dir/data/postgresql.conf"
    # A session of its own: test harnesses kill their process group when
    # done, and the server must outlive them. setpriv execs (runuser would
    # stay the server's parent, and stop with it on a SIGSTOP: the tests
    # stop the server so, and a stopped parent never reaps it).
    pg_user=""
    [ "$(id -u)" -eq 0 ] &&
        pg_user="setpriv --reuid=postgres --regid=postgres --init-groups"
    setsid $pg_user "$PGBIN/postgres" -D "$dir/data" \
        -c port="$port" -c listen_addresses="${PG_BIND:-127.0.0.1}" \
        -c unix_socket_directories="$dir/run" -c fsync=off \
        -c shared_buffers=16MB -c max_connections=100 \
        >>"$dir/postgres.log" 2>&1 </dev/null &
    launched=$!
    i=0
    while [ $i -lt 300 ]; do
        if [ -f "$dir/data/postmaster.pid" ] &&
           pg_as "$PGBIN/pg_isready" -q -h "$dir/run" -p "$port" -t 2; then
            head -n 1 "$dir/data/postmaster.pid" >"$dir/pid"
            return 0
        fi
        if ! kill -0 "$launched" 2>/dev/null; then
            pg_log "postgres exited; end of $dir/postgres.log:"
            tail -n 20 "$dir/postgres.log" >&2
            return 1
        fi
        sleep 0.1
        i=$((i + 1))
    done
    pg_log "postgres did not answer within 30 s; see $dir/postgres.log"
    kill -KILL "$launched" 2>/dev/null
    return 1
}

pg_start() {
    dir=${1:?usage: pg_start DIR}
    mkdir -p "$dir" || return 1
    dir=$(cd "$dir" && pwd)
    if [ ${#dir} -gt 90 ]; then
        pg_log "$dir is too long for a unix socket path"
        return 1
    fi
    pg_reach "$dir" || return 1
    mkdir -p "$dir/run"
    chown postgres "$dir/run"
    if pg_running "$dir"; then
        pg_log "already running in $dir"
    else
        chosen=0
        if [ ! -f "$dir/port" ]; then
            python3 "$(pg_root)/tests/lib/free_port.py" >"$dir/port" || return 1
            chosen=1
        fi
        fresh=0
        if [ ! -f "$dir/data/PG_VERSION" ]; then
            mkdir -p "$dir/data"
            chown postgres "$dir/data"
            chmod 700 "$dir/data"
            if ! pg_as "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust \
                    -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1; then
                pg_log "initdb failed; see $dir/initdb.log:"
                tail -n 20 "$dir/initdb.log" >&2
                return 1
            fi
            cp "$dir/data/postgresql.conf" "$dir/data/postgresql.conf.orig"
            chown postgres "$dir/data/postgresql.conf.orig"
            fresh=1
        fi
        tries=1
        until pg_launch "$dir"; do
            if [ "$chosen" = 1 ] && [ $tries -lt 5 ] &&
               tail -n 20 "$dir/postgres.log" | grep -q "already in use"; then
                python3 "$(pg_root)/tests/lib/free_port.py" >"$dir/port" || return 1
                pg_log "port taken meanwhile; trying port $(cat "$dir/port")"
                tries=$((tries + 1))
                continue
            fi
            return 1
        done
        if [ "$fresh" = 1 ] && [ -z "${PG_NO_DB:-}" ]; then
            if ! pg_psql "$dir" -d postgres \
                    -c "CREATE ROLE leaf LOGIN PASSWORD 'leafpw'" \
                    -c "CREATE DATABASE leaf OWNER leaf" ||
               ! pg_as "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/run" \
                    -p "$(cat "$dir/port")" -U leaf -d leaf \
                    <"$(pg_root)/sql/postgresql.sql"; then
                pg_log "cannot create database leaf"
                return 1
            fi
        fi
    fi
    PG_PORT=$(cat "$dir/port")
    host=${PG_BIND:-127.0.0.1}
    [ "$host" = 0.0.0.0 ] && host=127.0.0.1
    PG_URL=postgresql://leaf:leafpw@$host:$PG_PORT/leaf
    PG_DIR=$dir
    export PG_PORT PG_URL PG_DIR
    printf 'PG_PORT=%s\nPG_URL=%s\nPG_DIR=%s\n' "$PG_PORT" "$PG_URL" "$PG_DIR" \
        >"$dir/env"
    cat "$dir/env"
}

pg_stop() {
    dir=${1:?usage: pg_stop DIR}
    if ! pg_running "$dir"; then
        rm -f "$dir/pid"
        return 0
    fi
    pid=$(cat "$dir/pid")
    kill -INT "$pid" 2>/dev/null
    i=0
    while [ $i -lt 300 ] && kill -0 "$pid" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        pg_log "postgres $pid ignored INT for 30 s; killing"
        kill -KILL "$pid" 2>/dev/null
        while kill -0 "$pid" 2>/dev/null; do
            sleep 0.1
        done
    fi
    rm -f "$dir/pid"
    return 0
}

pg_restart() {
    dir=${1:?usage: pg_restart DIR}
    if [ ! -f "$dir/port" ] || [ ! -f "$dir/data/PG_VERSION" ]; then
        pg_log "no cluster was started in $dir"
        return 1
    fi
    pg_stop "$dir" && pg_start "$dir"
}

case "$0" in
*postgresql.sh)
    set -u
    if [ $# -ne 2 ]; then
        echo "usage: $0 start|stop|restart DIR" >&2
        exit 2
    fi
    case "$1" in
    start) pg_start "$2" ;;
    stop) pg_stop "$2" ;;
    restart) pg_restart "$2" ;;
    *)
        echo "usage: $0 start|stop|restart DIR" >&2
        exit 2
        ;;
    esac
    exit $?
    ;;
esac
