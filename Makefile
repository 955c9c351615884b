# leafd: a Leaf-style distributed unique-ID server.
#
#   make            build ./leafd
#   make run        install what is missing, build, serve the embedded default
#   make test       install what is missing, run every unit and black-box test
#   make check-asan the unit tests again under AddressSanitizer + UBSan
#   make bench      benchmark leafd against nginx (and peers) in one run
#   make lint       cppcheck over every C file, and the layers of src/ (also in make test)
#   make chaos-long the chaos run, MariaDB, PostgreSQL, ZooKeeper and Redis Sentinel failovers, their positive controls, long
#   make deb        the Debian packages build/leafd{,-dev}_<version>_<arch>.deb (tools/deb.sh)
#
# Plain make, -MMD dependencies, strict warnings (-Werror with WERROR=1, as CI).

CC      ?= cc
PKGS    := libevent libevent_pthreads jansson sqlite3 mariadb libpq libnghttp2 libssl libcrypto
WARN    := -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes \
           -Wmissing-prototypes -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN    += -Werror
endif
OPT     ?= -O2 -g
# src/ holds one folder per layer, lowest first (docs/design.md; make lint
# refuses an include or a symbol its "uses" table does not allow). Headers
# are included by name, so every folder is on the include path; objects go to
# build/ flat, since every file name carries its module's full prefix.
SRCDIRS := core db http snowflake store segment ids api
SRCINC  := $(SRCDIRS:%=-Isrc/%) -Isrc
vpath %.c src $(SRCDIRS:%=src/%)
CFLAGS  += -std=gnu11 $(OPT) $(WARN) -pthread -DTHREADED -D_GNU_SOURCE \
           $(SRCINC) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lzookeeper_mt -lhiredis -lm \
           -lprotobuf-c
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

SRCS    := $(wildcard src/*.c $(SRCDIRS:%=src/%/*.c))
# The gRPC schema (proto/): protoc-c writes its C into build/gen/ at build
# time, included as "leafd/v1/leafd.pb-c.h" (only src/api/ may: make lint).
PROTOS  := leafd/v1/leafd.proto grpc/health/v1/health.proto
PB_SRCS := $(PROTOS:%.proto=build/gen/%.pb-c.c)
PB_HDRS := $(PB_SRCS:.c=.h)
PB_OBJS := $(patsubst %.c,%.o,$(notdir $(PB_SRCS)))
CFLAGS  += -Ibuild/gen
OBJS    := $(patsubst %.c,build/%.o,$(notdir $(SRCS))) build/console_assets.o \
           $(PB_OBJS:%=build/%)
LIBOBJS := $(filter-out build/main.o,$(OBJS))
TESTS   := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/check_*.c))
TESTBIN := $(TESTS:%=build/tests/%)

ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
              -fno-sanitize-recover=undefined
ASAN_OBJS  := $(patsubst %.c,build/asan/%.o,$(notdir $(SRCS))) build/console_assets.o \
              $(PB_OBJS:%=build/asan/%)
ASAN_LIB   := $(filter-out build/asan/main.o,$(ASAN_OBJS))
ASAN_TESTS := $(TESTS:%=build/asan/tests/%)

# ThreadSanitizer: the suites whose threads race on purpose (the segment
# allocator's harnesses and its leases, the snowflake generator's, the HTTP
# park/wake (HTTP/1.1 and HTTP/2) and the UUID/ULID generators, the serial allocator, the RESP
# listener's pipelines, the worker ID lease's keeper against state/metrics
# readers and simultaneous claims, FF1 key copies sharing a domain, concealed
# tags enciphered on two threads). Suites built around libzookeeper_mt's own
# threads or the segment store's MySQL client stay in the plain and ASan runs.
TSAN_FLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
TSAN_OBJS  := $(patsubst %.c,build/tsan/%.o,$(notdir $(SRCS))) build/console_assets.o \
              $(PB_OBJS:%=build/tsan/%)
TSAN_LIB   := $(filter-out build/tsan/main.o,$(TSAN_OBJS))
TSAN_SUITES := check_segment check_snowflake check_http check_h2 check_idkinds check_resp check_mc \
               check_serial check_lease check_workerid_store check_ff1 check_conceal
TSAN_TESTS := $(TSAN_SUITES:%=build/tsan/tests/%)

.PHONY: all deps run test test-bins unit unit-asan check-asan check-tsan blackbox bench clean lint deb

all: leafd client

leafd: $(OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

leafd-asan: $(ASAN_OBJS)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

build/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

# The web console: tools/embed.c turns web/* into C data (src/api/console.c).
build/console_assets.c: tools/embed.c web/index.html $(wildcard web/*) src/core/version.h
	@mkdir -p $(@D)
	$(CC) -O2 -o build/embed tools/embed.c
	build/embed $@ src/core/version.h web/index.html $(filter-out web/index.html,$(wildcard web/*))

build/console_assets.o: build/console_assets.c src/api/console.h
	$(CC) $(CFLAGS) -c -o $@ $<

# protoc-c's C for proto/ (one rule writes both files), and its objects in
# every variant; the sources wait for the headers before they compile.
build/gen/%.pb-c.c build/gen/%.pb-c.h: proto/%.proto
	@mkdir -p build/gen
	protoc-c --proto_path=proto --c_out=build/gen $<

define pb_objs
build/$(notdir $(1:.c=.o)): $(1)
	$$(CC) $$(CFLAGS) -MMD -MP -c -o $$@ $$<
build/asan/$(notdir $(1:.c=.o)): $(1)
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS) $$(ASAN_FLAGS) -MMD -MP -c -o $$@ $$<
build/tsan/$(notdir $(1:.c=.o)): $(1)
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS) $$(TSAN_FLAGS) -MMD -MP -c -o $$@ $$<
build/fuzz/obj/$(notdir $(1:.c=.o)): $(1)
	@mkdir -p $$(@D)
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $$@ $$<
endef
$(foreach f,$(PB_SRCS),$(eval $(call pb_objs,$(f))))
$(OBJS) $(ASAN_OBJS) $(TSAN_OBJS) build/fuzz/obj/api_grpc_msg.o: | $(PB_HDRS)

build/asan/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -c -o $@ $<

# Helpers the unit tests share (tests/lib/*.c), built per variant.
TESTLIB_SRCS := tests/lib/idset.c tests/lib/tcpproxy.c tests/lib/h2cli.c tests/lib/tlsgen.c \
                tests/lib/procstop.c tests/lib/testfile.c
TESTLIB      := $(TESTLIB_SRCS:tests/lib/%.c=build/tests/lib/%.o)
# Only the test binaries link these: keep them (not intermediate files that
# make deletes), or each make test builds them again.
.SECONDARY: $(TSAN_OBJS) $(TESTLIB:build/%=build/asan/%) $(TESTLIB:build/%=build/tsan/%)

build/tests/lib/%.o: tests/lib/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

build/asan/tests/lib/%.o: tests/lib/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -c -o $@ $<

build/tsan/tests/lib/%.o: tests/lib/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(TSAN_FLAGS) -MMD -MP -c -o $@ $<

build/tests/%: tests/unit/%.c $(LIBOBJS) $(TESTLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/lib -MMD -MP -o $@ $< $(LIBOBJS) $(TESTLIB) $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

build/tsan/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(TSAN_FLAGS) -MMD -MP -c -o $@ $<

build/tsan/tests/%: tests/unit/%.c $(TSAN_LIB) $(TESTLIB:build/%=build/tsan/%)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(TSAN_FLAGS) -Itests/lib -MMD -MP -o $@ $< $(TSAN_LIB) $(TESTLIB:build/%=build/tsan/%) $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

build/asan/tests/%: tests/unit/%.c $(ASAN_LIB) $(TESTLIB:build/%=build/asan/%)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -Itests/lib -MMD -MP -o $@ $< $(ASAN_LIB) $(TESTLIB:build/%=build/asan/%) $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

# segment.c with a 4-bit generation, so that a test can wrap it (explicit
# rules: these binaries link this copy instead of build/segment.o).
SEGWRAP_DEPS := build/segment_tags.o build/util.o build/log.o
build/tests/segment_wrap.o: src/segment/segment.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DCTR_OFFSET_BITS=60 -MMD -MP -c -o $@ $<

build/tests/check_segment_wrap: tests/unit/check_segment_wrap.c build/tests/segment_wrap.o $(SEGWRAP_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $^ $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

build/asan/tests/segment_wrap.o: src/segment/segment.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -DCTR_OFFSET_BITS=60 -MMD -MP -c -o $@ $<

build/asan/tests/check_segment_wrap: tests/unit/check_segment_wrap.c build/asan/tests/segment_wrap.o $(SEGWRAP_DEPS:build/%=build/asan/%)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -o $@ $^ $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

# Install missing Debian packages (no-op when all are present).
deps:
	@sh .ci/deps.sh

run: deps
	@$(MAKE) --no-print-directory leafd
	./leafd

unit: leafd $(TESTBIN) build/tests/check_client
	@sh tests/lib/run_unit.sh $(TESTBIN) build/tests/check_client

unit-asan: $(ASAN_TESTS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		sh tests/lib/run_unit.sh $(ASAN_TESTS)

check-asan:
	@sh .ci/deps.sh test
	@$(MAKE) --no-print-directory WERROR=1 leafd $(ASAN_TESTS) build/asan/tests/check_client
	@UNIT_ONLY=asan sh tests/lib/run_all.sh

check-tsan:
	@sh .ci/deps.sh test
	@$(MAKE) --no-print-directory WERROR=1 leafd $(TSAN_TESTS) build/tsan/tests/check_client
	@UNIT_ONLY=tsan sh tests/lib/run_all.sh

blackbox: leafd
	@python3 tests/blackbox/blackbox.py

# Everything: builds warning-free, starts a throwaway MariaDB and ZooKeeper
# on free loopback ports, runs the unit tests (plain and ASan/UBSan) and the
# black-box tests, and stops what it started.
# Builds with one job per core (BUILD_JOBS), then runs the tests in lanes,
# several at once (tests/lib/run_all.py: TEST_JOBS, BB_JOBS, FUZZ_SECONDS).
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test:
	@sh .ci/deps.sh test
	@t0=$$(date +%s); $(MAKE) --no-print-directory test-bins || exit 1; \
		TEST_BUILD_SECS=$$(( $$(date +%s) - t0 )) sh tests/lib/run_all.sh

# Every binary make test runs.
test-bins:
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) WERROR=1 leafd leafd-asan $(TESTBIN) \
		$(ASAN_TESTS) $(TSAN_TESTS) $(CLIENT_TESTS) fuzz

bench: leafd
	@sh .ci/deps.sh bench && python3 bench/bench.py

# cppcheck over every C file of the tree (the server, its tests, fuzzers,
# tools and benchmarks); a finding fails. A false positive gets an inline
# `// cppcheck-suppress <id>` beside a comment that says why.
LINT_DIRS := src tests/unit tests/lib tests/client clients fuzz tools bench

# The layer check asks the compiler (cc -MM with these CFLAGS) and nm (the
# objects' symbols), so it builds the objects first.
lint: $(OBJS)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability --inline-suppr \
		--suppress=missingIncludeSystem $(SRCINC) -Iclients/c $(LINT_DIRS)
	python3 tools/check_layers.py --self-test --cc "$(CC)" --cflags "$(CFLAGS)"
	python3 tools/check_docs.py --self-test
	python3 tools/check_docs.py

clean:
	rm -rf build leafd leafd-asan

deb:
	@sh .ci/deps.sh deb && sh tools/deb.sh

-include $(OBJS:.o=.d) $(ASAN_OBJS:.o=.d) $(TSAN_OBJS:.o=.d) $(TESTBIN:=.d) \
         $(ASAN_TESTS:=.d) $(TSAN_TESTS:=.d) \
         $(wildcard build/tests/lib/*.d build/asan/tests/lib/*.d build/tsan/tests/lib/*.d)

# ---- fuzzing (fuzz/) and deployment checks --------------------------------
#   make fuzz           build the libFuzzer targets build/fuzz/fuzz_<name> (clang)
#   make fuzz-ci        build them, replay fuzz/regressions/, fuzz each for
#                       FUZZ_SECONDS (30) seconds; fails on a crash (make test
#                       replays the same, then fuzzes each for 8 s)
#   make compose-check  docker-compose.yml is valid (docker-compose config -q)
FUZZ_CC      ?= clang
FUZZ_CFLAGS  := -std=gnu11 -O1 -g -fno-omit-frame-pointer -Wall -Wextra \
                -Wno-unused-parameter -pthread -DTHREADED -D_GNU_SOURCE $(SRCINC) -Ibuild/gen \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FUZZ_NAMES   := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_BINS    := $(FUZZ_NAMES:%=build/fuzz/fuzz_%)
# The src/ modules each target links (never main.c).
FUZZ_OBJS_http_parse := http_parse
FUZZ_OBJS_config     := config idstr log util
FUZZ_OBJS_decode     := sfcodec util
FUZZ_OBJS_util       := util
FUZZ_OBJS_idstr      := idstr
FUZZ_OBJS_idkinds    := uuid7 ulid csprng sfcodec util
FUZZ_OBJS_tzone      := tzone util
FUZZ_OBJS_serial_pattern := serial_fmt tzone util
FUZZ_OBJS_serial_defs := serial serial_rows store store_marks serial_fmt tzone config idstr log util ff1 keyfile
FUZZ_OBJS_serial_reveal := serial serial_rows store store_marks serial_fmt tzone config idstr log util ff1 keyfile
FUZZ_OBJS_resp_parse  := resp_parse
FUZZ_OBJS_mc_parse    := mc_parse
FUZZ_OBJS_mc_bin_parse := mc_bin_parse
FUZZ_OBJS_multi_block := multi_block util
FUZZ_OBJS_segment_model := segment segment_tags log util
FUZZ_OBJS_redis_url  := workerid_redis_url util
FUZZ_OBJS_redis_sentinel := workerid_redis_sentinel util
FUZZ_OBJS_zk_node    := workerid_zk_node util
FUZZ_OBJS_serial_zonerec := serial_zonerec util
FUZZ_OBJS_mysql_url  := db_mysql_url util
FUZZ_OBJS_pg_conninfo := db_pg_conninfo util
FUZZ_OBJS_grpc_msg   := api_grpc_msg leafd.pb-c health.pb-c idstr util
FUZZ_OBJS_grpc_frame := grpc_frame
FUZZ_OBJS_h2_conn    := http_h2 http_h2_reply http_conn http_conn_mc http_conn_info http_park http_tls http_out http_server http_parse resp_parse mc_parse mc_bin_parse grpc_frame log util
FUZZ_OBJS_tls_conn   := http_tls log util
FUZZ_OBJS_marks      := store_marks log util
FUZZ_OBJS_ff1        := ff1 util
FUZZ_OBJS_conceal    := conceal keyfile ff1 config idstr log util
fuzz_objs = $(patsubst %,build/fuzz/obj/%.o,$(FUZZ_OBJS_$(1)))
# The C client's lease answer parser (clients/c/, not src/).
build/fuzz/fuzz_lease_answer: clients/c/lease_parse.c
# The TLS target makes its certificates with the tests' helper.
build/fuzz/fuzz_tls_conn: tests/lib/tlsgen.c
build/fuzz/fuzz_tls_conn: FUZZ_CFLAGS += -Itests/lib

.PHONY: fuzz fuzz-ci compose-check

fuzz: $(FUZZ_BINS)

fuzz-ci: fuzz
	@FUZZ_SECONDS=$(or $(FUZZ_SECONDS),30) sh fuzz/run.sh

build/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

build/fuzz/fuzz_%: fuzz/fuzz_%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ \
		$(filter %.c %.o,$^) $(LDFLAGS) $(LDLIBS)

$(foreach n,$(FUZZ_NAMES),$(eval build/fuzz/fuzz_$(n): $(call fuzz_objs,$(n))))

compose-check:
	docker-compose -f docker-compose.yml config -q

-include $(wildcard build/fuzz/*.d build/fuzz/obj/*.d)

# --- bench: the in-process microbenchmark and the database-per-ID client ---
# (bench/bench.py runs both; `make bench-dbload` runs only the 2-minute
# MariaDB load figure, which `DBLOAD=1 make bench` adds to the full table;
# `make bench-conceal` only the concealed-against-plain section.)
BENCH_BINS := build/microbench build/dbclient build/clientbench build/mcload build/storebench

.PHONY: bench-dbload bench-conceal

bench: $(BENCH_BINS)

build/microbench: bench/microbench.c $(LIBOBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(LIBOBJS) $(LDFLAGS) $(LDLIBS)

build/storebench: bench/storebench.c $(LIBOBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(LIBOBJS) $(LDFLAGS) $(LDLIBS)

build/clientbench: bench/clientbench.c build/libleafd-client.a
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< build/libleafd-client.a $(CLIENT_LIBS)

build/dbclient: bench/dbclient.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(LDFLAGS) $(LDLIBS)

build/mcload: bench/mcload.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<

bench-dbload: leafd $(BENCH_BINS)
	@sh .ci/deps.sh bench && ONLY=dbload python3 bench/bench.py

# concealed values against plain ones (bench/conceal.py; in make bench too)
bench-conceal: leafd $(BENCH_BINS)
	@sh .ci/deps.sh bench && ONLY=conceal python3 bench/bench.py

-include $(BENCH_BINS:=.d)

# --- chaos: three leafd nodes behind nginx, under load, while a node is
# killed, every node restarted, MariaDB and ZooKeeper stopped and a node's
# clock stepped back (tests/blackbox/chaos.py). `make chaos` is the long run, about
# DURATION seconds (default 600); `python3 tests/blackbox/chaos.py --short` is the
# CI run (under 5 minutes). Needs nginx and libfaketime.
.PHONY: chaos

chaos: leafd
	@python3 tests/blackbox/chaos.py --duration=$(or $(DURATION),600)

# --- chaos-long: the chaos run above, then tests/blackbox/failover.py's
# MariaDB failovers (network namespaces, root) with each phase PHASE_SECS
# (default 30) long, failover_multidb.py's (a member of a set failing over;
# also with a node idle through it, and the address moved first),
# failover_pg.py's (PostgreSQL standbys, async and sync, promoted) and
# galera.py's (3 rounds), zk_ensemble.py's (a ZooKeeper ensemble; also its
# restore with 8 s fence steps), bb_datacenters' two datacenters under load
# for PHASE_SECS (with their own positive control), sentinel.py's Redis
# Sentinel scenarios, then the positive controls against leafd built from
# OLD_COMMIT (default a46976b, before issue 28's fix), ZK_OLD_COMMIT
# (default f146e8c, before the ZooKeeper restore rule) and
# SENTINEL_OLD_COMMIT (default f146e8c, before the Sentinel support: plain
# URLs, no Sentinel majority behind a write; sentinel.py's split) in
# scratch worktrees: they pass only if that binary repeats IDs. The
# PostgreSQL store came with its failover rule (4009dce) and no setting
# turns it off, so failover_pg.py's control runs a leafd built from HEAD
# with the rule's two checks cut out by sed (store_pg.c's server check
# after a load, store_marks.c's range-below-the-marks check); likewise
# bb_pg_multidb.py --guardless runs a leafd whose one-URL PostgreSQL node
# has no single-database guard (store_pg.c's pg_single_check cut out): it
# passes only if that node hands out IDs in another member's blocks.
OLD_COMMIT ?= a46976b
ZK_OLD_COMMIT ?= f146e8c
SENTINEL_OLD_COMMIT ?= f146e8c
.PHONY: chaos-long
chaos-long: leafd
	@sh .ci/deps.sh test
	@python3 tests/blackbox/chaos.py --duration=$(or $(DURATION),600)
	@python3 tests/blackbox/failover.py --phase-secs=$(or $(PHASE_SECS),30)
	@python3 tests/blackbox/failover_multidb.py --phase-secs=$(or $(PHASE_SECS),30)
	@python3 tests/blackbox/failover_multidb.py --phase-secs=$(or $(PHASE_SECS),30) --idle-node
	@python3 tests/blackbox/failover_multidb.py --phase-secs=$(or $(PHASE_SECS),30) --order vip-first
	@python3 tests/blackbox/failover_pg.py --phase-secs=$(or $(PHASE_SECS),30)
	@python3 tests/blackbox/sentinel.py --phase-secs=$(or $(PHASE_SECS),30)
	@python3 tests/blackbox/galera.py
	@DC_LOAD_SECS=$(or $(PHASE_SECS),30) python3 tests/blackbox/blackbox.py bb_datacenters.test_two_datacenters
	@python3 tests/blackbox/zk_ensemble.py --phase-secs=$(or $(PHASE_SECS),20)
	@python3 tests/blackbox/zk_ensemble.py --fence-step 8000 --only restore
	@old=$$(mktemp -d /tmp/lfh-old-XXXXXX); trap 'git worktree remove --force "$$old"; rm -rf "$$old"' EXIT; \
		git worktree add --detach "$$old" $(OLD_COMMIT) >/dev/null && \
		make --no-print-directory -C "$$old" -j2 leafd >/dev/null && \
		python3 tests/blackbox/failover.py --phase-secs=$(or $(PHASE_SECS),30) \
			--expect-duplicates --leafd "$$old/leafd" && \
		python3 tests/blackbox/failover_multidb.py --phase-secs=$(or $(PHASE_SECS),30) \
			--idle-node --expect-duplicates --leafd "$$old/leafd"
	@old=$$(mktemp -d /tmp/lfz-old-XXXXXX); trap 'git worktree remove --force "$$old"; rm -rf "$$old"' EXIT; \
		git worktree add --detach "$$old" $(ZK_OLD_COMMIT) >/dev/null && \
		make --no-print-directory -C "$$old" -j2 leafd >/dev/null && \
		python3 tests/blackbox/zk_ensemble.py --fence-step 8000 --only restore \
			--expect-duplicates --leafd "$$old/leafd"
	@old=$$(mktemp -d /tmp/lfs-old-XXXXXX); trap 'git worktree remove --force "$$old"; rm -rf "$$old"' EXIT; \
		git worktree add --detach "$$old" $(SENTINEL_OLD_COMMIT) >/dev/null && \
		make --no-print-directory -C "$$old" -j2 leafd >/dev/null && \
		python3 tests/blackbox/sentinel.py --phase-secs=$(or $(PHASE_SECS),30) \
			--expect-duplicates --leafd "$$old/leafd"
	@old=$$(mktemp -d /tmp/lfg-norule-XXXXXX); trap 'git worktree remove --force "$$old"; rm -rf "$$old"' EXIT; \
		git worktree add --detach "$$old" HEAD >/dev/null && \
		sed -i 's/if (check && res == STORE_OK &&$$/if (0 \&\& check \&\& res == STORE_OK \&\&/' \
			"$$old/src/store/store_pg.c" && \
		sed -i 's/^    if (max_id - step < mark) {$$/    if (0 \&\& max_id - step < mark) {/' \
			"$$old/src/store/store_marks.c" && \
		grep -q 'if (0 && check && res' "$$old/src/store/store_pg.c" && \
		grep -q 'if (0 && max_id - step < mark)' "$$old/src/store/store_marks.c" && \
		make --no-print-directory -C "$$old" -j2 leafd >/dev/null && \
		python3 tests/blackbox/failover_pg.py --phase-secs=$(or $(PHASE_SECS),30) \
			--expect-duplicates --leafd "$$old/leafd"
	@old=$$(mktemp -d /tmp/lfp-noguard-XXXXXX); trap 'git worktree remove --force "$$old"; rm -rf "$$old"' EXIT; \
		git worktree add --detach "$$old" HEAD >/dev/null && \
		sed -i 's/if (rc == STORE_OK && pg_single_check(p, cause) == -1)/if (0 \&\& rc == STORE_OK \&\& pg_single_check(p, cause) == -1)/; s/if (a->want == NULL && pg_single_check(p, cause) == -1)/if (0 \&\& a->want == NULL \&\& pg_single_check(p, cause) == -1)/' \
			"$$old/src/store/store_pg.c" && \
		test "$$(grep -c 'if (0 && .*pg_single_check' "$$old/src/store/store_pg.c")" = 2 && \
		make --no-print-directory -C "$$old" -j2 leafd >/dev/null && \
		python3 tests/blackbox/bb_pg_multidb.py --guardless "$$old/leafd"

# --- libleafd-client (clients/c/): IDs made in process from leased ranges.
# It links leafd's own snowflake decoder (src/snowflake/sfcodec.c, src/core/util.c), built
# again position-independent into the library. The objects are linked into
# one (ld -r) without the functions the API does not reach (--gc-sections:
# util.c's aborting x* allocators are left out), whose symbols are all made
# local but the leafd_ API (objcopy), so the library never clashes with a
# program's own xmalloc or util_*; tests/client/check_exports.sh then
# refuses an archive that exports any other symbol or calls abort(). Its tests start ./leafd: build/tests/check_client and its
# ASan and TSan builds, each linked against its own build of the archive,
# with the library's allocations, threads and libcurl handles routed
# through the test's fault injection (CLIENT_WRAP); run_unit.sh runs them
# with the other build/*/tests/check_* suites in make test.
#   make client          build/libleafd-client.a, its example
#   make install-client  header and library under PREFIX (/usr/local)
CLIENT_SRCS := clients/c/leafd_client.c clients/c/lease_parse.c src/snowflake/sfcodec.c src/core/util.c
CLIENT_CFLAGS = $(CFLAGS) -fPIC -ffunction-sections -fdata-sections -Iclients/c \
                $(shell pkg-config --cflags libcurl 2>/dev/null)
CLIENT_LIBS := $(shell pkg-config --libs libcurl 2>/dev/null) -pthread
CLIENT_OBJS := $(patsubst %.c,build/client/%.o,$(notdir $(CLIENT_SRCS)))
CLIENT_TESTS := build/tests/check_client build/asan/tests/check_client \
                build/tsan/tests/check_client
CLIENT_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=pthread_create \
               -Wl,--wrap=pthread_atfork,--wrap=curl_easy_init
# The API: the functions leafd_client.h declares.
CLIENT_API := $(shell grep -oP '\bleafd_\w+(?=\x28)' clients/c/leafd_client.h | sort -u)
PREFIX ?= /usr/local

.PHONY: client install-client

client: build/libleafd-client.a build/leafd-client-example

build/client/%.o: clients/c/%.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -MMD -MP -c -o $@ $<

build/client/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -MMD -MP -c -o $@ $<

build/asan/client/%.o: clients/c/%.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) $(ASAN_FLAGS) -MMD -MP -c -o $@ $<

build/asan/client/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) $(ASAN_FLAGS) -MMD -MP -c -o $@ $<

build/tsan/client/%.o: clients/c/%.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) $(TSAN_FLAGS) -MMD -MP -c -o $@ $<

build/tsan/client/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) $(TSAN_FLAGS) -MMD -MP -c -o $@ $<

# $(1): the objects. One object (ld -r) of what the API reaches, only
# leafd_* left global, archived and checked; a failed check deletes it.
define client_archive
	rm -f $@ $(@:.a=.o)
	$(LD) -r --gc-sections $(CLIENT_API:%=-u %) -o $(@:.a=.o) $(1)
	objcopy --wildcard --keep-global-symbol='leafd_*' $(@:.a=.o)
	ar rcs $@ $(@:.a=.o)
	sh tests/client/check_exports.sh $@ clients/c/leafd_client.h || { rm -f $@; exit 1; }
endef

build/libleafd-client.a: $(CLIENT_OBJS) tests/client/check_exports.sh clients/c/leafd_client.h
	$(call client_archive,$(CLIENT_OBJS))

build/asan/libleafd-client.a: $(CLIENT_OBJS:build/%=build/asan/%) tests/client/check_exports.sh
	$(call client_archive,$(CLIENT_OBJS:build/%=build/asan/%))

build/tsan/libleafd-client.a: $(CLIENT_OBJS:build/%=build/tsan/%) tests/client/check_exports.sh
	$(call client_archive,$(CLIENT_OBJS:build/%=build/tsan/%))

build/leafd-client-example: clients/c/example.c build/libleafd-client.a
	$(CC) $(CLIENT_CFLAGS) -o $@ $< build/libleafd-client.a $(CLIENT_LIBS)

build/tests/check_client: tests/client/check_client.c build/libleafd-client.a clients/c/leafd_client.h
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< build/libleafd-client.a $(CLIENT_WRAP) $(CHECK_LIBS) $(CLIENT_LIBS) -lm

build/asan/tests/check_client: tests/client/check_client.c build/asan/libleafd-client.a clients/c/leafd_client.h
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) $(ASAN_FLAGS) -o $@ $< build/asan/libleafd-client.a $(CLIENT_WRAP) $(CHECK_LIBS) $(CLIENT_LIBS) -lm

build/tsan/tests/check_client: tests/client/check_client.c build/tsan/libleafd-client.a clients/c/leafd_client.h
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) $(TSAN_FLAGS) -o $@ $< build/tsan/libleafd-client.a $(CLIENT_WRAP) $(CHECK_LIBS) $(CLIENT_LIBS) -lm

install-client: build/libleafd-client.a
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib
	install -m 644 clients/c/leafd_client.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 build/libleafd-client.a $(DESTDIR)$(PREFIX)/lib/

-include $(CLIENT_OBJS:.o=.d) $(CLIENT_OBJS:build/%.o=build/asan/%.d) \
         $(CLIENT_OBJS:build/%.o=build/tsan/%.d)
