#!/bin/sh
# fuzz/run.sh: replay the regression inputs, then run each libFuzzer target
# for a bounded time. Used by `make fuzz-ci`; the binaries come from
# `make fuzz` (build/fuzz/fuzz_<name>).
#
#   sh fuzz/run.sh [name ...]        default: every fuzz/fuzz_*.c
#   FUZZ_SECONDS=30                  time per target (libFuzzer -max_total_time)
#   FUZZ_CORPUS=DIR                  where new inputs go (build/fuzz/corpus)
#
# New interesting inputs go to FUZZ_CORPUS/<name>/ (the committed seeds in
# fuzz/corpus/<name>/ are only read). make fuzz-ci keeps them in
# build/fuzz/corpus, so that fuzzing goes on where it stopped; make test
# gives each run an empty directory, so that what it fuzzes never depends on
# what an earlier run left. A crash stops the run with exit 1 and
# leaves its input in build/fuzz/artifacts/<name>/; to turn it into a
# regression test:
#   build/fuzz/fuzz_<name> -minimize_crash=1 -runs=20000 \
#       -exact_artifact_path=fuzz/regressions/<name>/<short-name> <crash-file>
# Every file under fuzz/regressions/<name>/ is replayed before fuzzing.
set -u
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
out=build/fuzz
corpus=${FUZZ_CORPUS:-$out/corpus}
names=${*:-$(for f in fuzz/fuzz_*.c; do basename "$f" .c | sed 's/^fuzz_//'; done)}

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Per-target libFuzzer options: input size bounds and dictionaries.
opts() {
    case "$1" in
    http_parse) echo "-max_len=12000 -dict=fuzz/http_parse.dict" ;;
    config)     echo "-max_len=8192 -dict=fuzz/config.dict" ;;
    decode)     echo "-max_len=64" ;;
    redis_url)  echo "-max_len=1100" ;;
    redis_sentinel) echo "-max_len=1100" ;;
    mysql_url)  echo "-max_len=1100 -dict=fuzz/mysql_url.dict" ;;
    pg_conninfo) echo "-max_len=1100 -dict=fuzz/pg_conninfo.dict" ;;
    util)       echo "-max_len=600" ;;
    idkinds)    echo "-max_len=64" ;;
    idstr)      echo "-max_len=100" ;;
    tzone)      echo "-max_len=8192" ;;
    serial_zonerec) echo "-max_len=15000" ;;
    serial_pattern) echo "-max_len=64" ;;
    serial_defs) echo "-max_len=2048 -dict=fuzz/serial_defs.dict" ;;
    resp_parse) echo "-max_len=4096 -dict=fuzz/resp.dict" ;;
    mc_parse)   echo "-max_len=4096 -dict=fuzz/mc.dict" ;;
    mc_bin_parse) echo "-max_len=4096" ;;
    grpc_frame) echo "-max_len=300" ;;
    h2_conn)    echo "-max_len=16384" ;;
    segment_model) echo "-max_len=400" ;;
    multi_block) echo "-max_len=600" ;;
    lease_answer) echo "-max_len=1024" ;;
    zk_node)    echo "-max_len=512" ;;
    grpc_msg)   echo "-max_len=1024" ;;
    tls_conn)   echo "-max_len=4096" ;;
    ff1)        echo "-max_len=2048" ;;
    *)          echo "" ;;
    esac
}

fail=0
summary=""
for n in $names; do
    bin=$out/fuzz_$n
    if [ ! -x "$bin" ]; then
        echo "fuzz: $bin missing: run make fuzz" >&2
        exit 2
    fi
    # 1. Regressions: every saved crash input must pass now.
    if [ -d "fuzz/regressions/$n" ] && [ -n "$(ls -A "fuzz/regressions/$n" 2>/dev/null)" ]; then
        echo "fuzz: $n: replaying $(ls "fuzz/regressions/$n" | wc -l) regression input(s)"
        if ! "$bin" -runs=1 "fuzz/regressions/$n"/* >"$out/$n.regress.log" 2>&1; then
            echo "fuzz: $n: a regression input fails again:" >&2
            tail -40 "$out/$n.regress.log" >&2
            fail=1
            summary="$summary
  $n: REGRESSION FAILED (log $out/$n.regress.log)"
            continue
        fi
    fi
    # 2. Fuzz for a bounded time.
    mkdir -p "$corpus/$n" "$out/artifacts/$n"
    echo "fuzz: $n: fuzzing for ${secs}s"
    # shellcheck disable=SC2046
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 \
        -artifact_prefix="$out/artifacts/$n/" $(opts "$n") \
        "$corpus/$n" "fuzz/corpus/$n" >"$out/$n.log" 2>&1
    rc=$?
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$out/$n.log")
    cov=$(grep -o 'cov: [0-9]*' "$out/$n.log" | tail -1)
    units=$(ls "$corpus/$n" | wc -l)
    if [ $rc -ne 0 ]; then
        fail=1
        echo "fuzz: $n: FAILED (exit $rc); inputs in $out/artifacts/$n/:" >&2
        ls "$out/artifacts/$n" >&2
        grep -m1 -A30 -E 'ERROR: |runtime error|invariant failed|prefix of' "$out/$n.log" >&2
        summary="$summary
  $n: CRASH after $execs execs (log $out/$n.log)"
    else
        summary="$summary
  $n: ok, $execs execs in ${secs}s, $cov, corpus $units"
    fi
done
echo "fuzz summary:$summary"
exit $fail
