#!/bin/sh
# run_all.sh: what `make test` runs after building: every test, in lanes
# that run at once, each with its own servers, ports and log
# (tests/lib/run_all.py says which and how). Ends with the line
# "tests: N passed, N failed".
#   UNIT_ONLY=asan   only the ASan/UBSan unit tests (make check-asan)
#   UNIT_ONLY=tsan   only the ThreadSanitizer unit tests (make check-tsan)
#   TEST_LANES="unit lint"  only these lanes; TEST_JOBS=N lanes at once (2 per core)
#   FUZZ_SECONDS=N   seconds per fuzz target (8 here; make fuzz-ci: 30)
cd "$(dirname "$0")/../.." || exit 1
exec python3 tests/lib/run_all.py
