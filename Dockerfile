# leafd container image: build from source on Debian 12, run on Debian 12 slim
# with only the runtime libraries, as a non-root user.
#
#   docker build -t leafd .
#   docker run -p 8080:8080 leafd                      # embedded default (SQLite)
#   docker run -p 8080:8080 \
#       -e LEAFD_LEAF_SEGMENT_ENABLE=true \
#       -e LEAFD_LEAF_JDBC_URL=jdbc:mysql://db:3306/leaf \
#       -e LEAFD_LEAF_JDBC_USERNAME=leaf -e LEAFD_LEAF_JDBC_PASSWORD=secret \
#       leafd
#
# Configuration is by environment: every key of `leafd --help` is
# LEAFD_ + the key upper-cased with '.' as '_' (leaf.jdbc.url ->
# LEAFD_LEAF_JDBC_URL, http.max_connections -> LEAFD_HTTP_MAX_CONNECTIONS).
# leafd refuses to start on an unknown LEAFD_* variable, so a typo is caught.
# A config file works too: mount it and set LEAFD_CONFIG=/etc/leafd/leafd.conf
# (with a file, a mode is on only if the file or the environment turns it on).
# State (the SQLite file, the snowflake worker-ID/fence cache) lives in the
# volume /var/lib/leafd: keep it across restarts.

# ---- build -------------------------------------------------------------------
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc make pkg-config libc6-dev libevent-dev default-libmysqlclient-dev \
        libzookeeper-mt-dev libjansson-dev libsqlite3-dev libpq-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# `make clean` first: a leafd or build/ copied from the host must not be
# taken as up to date.
RUN make clean && make -j"$(nproc)" leafd && strip leafd \
 && ./leafd --version

# ---- run ---------------------------------------------------------------------
FROM debian:12-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libevent-2.1-7 libevent-core-2.1-7 libevent-pthreads-2.1-7 \
        libjansson4 libsqlite3-0 libmariadb3 libpq5 libzookeeper-mt2 \
        curl ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 leafd \
 && useradd --system --uid 10001 --gid leafd --home-dir /var/lib/leafd \
        --shell /usr/sbin/nologin leafd \
 && install -d -o leafd -g leafd -m 0750 /var/lib/leafd
COPY --from=build /src/leafd /usr/local/bin/leafd
COPY --from=build /src/sql/ /usr/local/share/leafd/sql/
COPY --from=build /src/conf/leafd.conf /usr/local/share/leafd/leafd.conf.example

# Defaults for a container: listen on every interface, keep state in the
# volume. Override any of them with -e.
ENV LEAFD_LISTEN_ADDRESS=0.0.0.0 \
    LEAFD_LISTEN_PORT=8080 \
    LEAFD_SEGMENT_SQLITE_PATH=/var/lib/leafd/leafd.db \
    LEAFD_SNOWFLAKE_CACHE_FILE=/var/lib/leafd/snowflake-cache.json

USER leafd:leafd
WORKDIR /var/lib/leafd
VOLUME ["/var/lib/leafd"]
EXPOSE 8080

# 200 while every enabled mode can serve; 503 (unhealthy) when one cannot.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS -o /dev/null "http://127.0.0.1:${LEAFD_LISTEN_PORT:-8080}/health" || exit 1

# SIGTERM: stop accepting, finish requests in flight (shutdown_timeout_ms,
# default 5 s; give `docker stop -t` more than that), close ZooKeeper, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/leafd"]
