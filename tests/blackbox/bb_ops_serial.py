"""Operator actions on serial numbers, under load (issue 20's matrix).

Each test changes a serial definition the way an operator does: stop leafd,
edit the config, start it again against the same database, while several
client threads take serials all the while (before, and again after, each
restart). It asserts that no serial text is handed out twice, or that
leafd refuses the new config with a message that names the codes.

The database's clock is pinned to a fixed date with the test-only
LEAFD_TEST_SERIAL_DB_OFFSET_MS (see bb_serial.py), so that the dates the
serials print do not depend on when the test runs. Each test prints with a
prefix of its own, because rows are named after what their serials print
and the shared MariaDB keeps them between tests. The clock-step test uses
the embedded SQLite store, whose clock ('now') is the leafd process's own,
and steps it with libfaketime across midnight and back."""
import os
import random
import sqlite3
import threading
import time

from bbutil import Client, TestFailure, Workdir, check, eq, faketime_preload, parallel

from bb_serial import OFFSET_ENV, ms_utc, now_ms

TESTS = [
    "test_reset_change_under_load",
    "test_code_rename_under_load",
    "test_prefix_change_under_load",
    "test_zone_change_under_load",
    "test_clock_step_during_reset_change",
    "test_rolling_upgrade_old_node",
    "test_shape_change_same_text",
    "test_pattern_reorder_after_period",
    "test_serial_row_restored",
    "test_snowflake_zone_change",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): operator procedures under load, bound by their waits.
PLAIN_ONLY = set(TESTS)

CLIENTS = 4
PHASE_S = 2.0


def prefix_of_own(tag):
    """A prefix no other run of the test has used (3 letters + 5 digits)."""
    return "%s%05d" % (tag, random.randrange(10 ** 5))


MIN_SERVED = 50          # a phase takes at least this many serials
MAX_PHASE_S = 90.0      # however slow the machine, then it fails


def wait_for(cond, what, timeout=MAX_PHASE_S):
    """Poll cond() until it holds; fail naming what after timeout s."""
    end = time.time() + timeout
    while not cond():
        if time.time() > end:
            raise TestFailure("waited %.0f s for %s" % (timeout, what))
        time.sleep(0.02)


def load(node, code, seconds=PHASE_S, clients=CLIENTS, during=None):
    """Several clients take serials of code from node for at least seconds
    and until MIN_SERVED are taken (a busy machine may serve the first one
    late); during(taken) (if given) runs meanwhile in this thread, taken()
    being the serials so far. Returns the serials. A 503 must be
    serial_unavailable with a message (a clear refusal); anything else
    fails the test."""
    got = [[] for _ in range(clients)]
    refused = [0] * clients
    errors = []
    done = threading.Event()

    def client(i):
        c = Client(node.port)
        try:
            while not done.is_set():
                r = c.get("/serial/%s?count=%d&format=json" % (code, 1 + i % 3))
                if r.status == 200:
                    got[i].extend(r.json()["ids"])
                elif r.status == 503 and r.json().get("error") == "serial_unavailable" \
                        and r.json().get("message"):
                    refused[i] += 1
                else:
                    raise TestFailure("client %d: %r" % (i, r))
        except BaseException as e:
            errors.append(e)
        finally:
            c.close()

    def taken():
        return [s for g in got for s in list(g)]
    ts = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.time()
    for t in ts:
        t.start()
    try:
        if during is not None:
            during(taken)
        wait_for(lambda: errors or (time.time() >= start + seconds and
                                    len(taken()) >= MIN_SERVED),
                 "%d serials of code %s (%d refused):\n%s"
                 % (MIN_SERVED, code, sum(refused), node.log()))
    finally:
        done.set()
        for t in ts:
            t.join()
    if errors:
        raise errors[0]
    return taken()


def no_repeat(phases):
    """phases: lists of serials, one per phase. None is handed out twice,
    within a phase or across them."""
    seen, twice = {}, []
    for k, batch in enumerate(phases):
        for s in batch:
            if s in seen:
                twice.append((s, seen[s], k))
            seen[s] = k
    if twice:
        raise TestFailure("%d serials handed out twice (of %d), e.g. %s in phase %d "
                          "and %d" % ((len(twice), len(seen) + len(twice)) + twice[0]))


def must_refuse(d, code, got, what):
    """Start d, which must refuse to start. If it serves instead, load it
    and report the serials handed out twice (the harm), else what."""
    try:
        d.start()               # raises when leafd exits instead
    except TestFailure:
        return
    got.append(load(d, code))
    d.stop()
    no_repeat(got)
    raise TestFailure(what)


def mariadb_conf(db, defs, **extra):
    conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
            "segment.mysql.url": db.url, "serial.count_max": "10"}
    conf.update(extra)
    for code, fields in defs.items():
        for k, v in fields.items():
            conf["serial.%s.%s" % (code, k)] = v
    return conf


def run_phases(wd, phases, env):
    """phases: (code, conf) in order; one leafd per phase, stopped before
    the next starts (the same database). Returns the serials per phase."""
    out = []
    for k, (code, conf) in enumerate(phases):
        d = wd.leafd(conf=conf, name="phase%d" % k, env=env).start()
        out.append(load(d, code))
        eq(d.stop(), 0, "phase %d: leafd exit status" % k)
    return out


def pinned(ms):
    return {OFFSET_ENV: str(ms - now_ms())}


def test_reset_change_under_load(ctx):
    """reset day -> month -> year -> day on one day, restarts between: the
    month's row starts above the day's, and so on; then a node with reset
    day and one with month at once. Nothing repeats (before issue 20 each
    new reset started a row at 1 printing the same text)."""
    db = ctx.shared_mariadb()
    pfx = prefix_of_own("RST")
    base = {"prefix": pfx, "step": "200"}
    phases = []
    for reset in ("day", "month", "year", "day"):
        phases.append(("R", mariadb_conf(db, {"R": dict(base, reset=reset)})))
    with Workdir("ops-serial-reset") as wd:
        env = pinned(ms_utc(2026, 11, 23, 12))
        got = run_phases(wd, phases, env)
        # A rolling restart: a node with the old reset and one with the new
        # serve at once. Every load starts above the other reset's row.
        nodes = [wd.leafd(conf=phases[k][1], name="rolling%d" % k, env=env).start()
                 for k in (0, 1)]
        got += parallel(2, lambda k: load(nodes[k], "R", clients=CLIENTS // 2))
        for n in nodes:
            # Their loads' locks meet; a deadlock InnoDB breaks runs again.
            check("cannot take a range" not in n.log(), "a load failed:\n%s" % n.log())
            eq(n.stop(), 0, "rolling: leafd exit status")
        no_repeat(got)
        for batch in got:
            check(all(s.startswith(pfx + "20261123") for s in batch), "one printed day")


def test_code_rename_under_load(ctx):
    """A code renamed, its prefix kept: the same rows (they are named after
    what is printed), so nothing repeats. Keeping the old name beside the
    new one is refused at start, naming both codes."""
    db = ctx.shared_mariadb()
    pfx = prefix_of_own("REN")
    fields = {"prefix": pfx, "step": "200"}
    phases = [("PAY", mariadb_conf(db, {"PAY": fields})),
              ("PAYMENT", mariadb_conf(db, {"PAYMENT": fields})),
              ("PAY", mariadb_conf(db, {"PAY": fields}))]
    with Workdir("ops-serial-rename") as wd:
        got = run_phases(wd, phases, pinned(ms_utc(2026, 11, 23, 12)))
        no_repeat(got)
        both = wd.leafd(conf=mariadb_conf(db, {"PAY": fields, "PAYMENT": fields}),
                        name="both")
        check(both.start(expect_fail=True) != 0, "two codes printing one text started")
        check("serial.PAY (line" in both.log() and "and serial.PAYMENT can print the "
              "same text" in both.log(), "the refusal names both codes:\n%s" % both.log())


def test_prefix_change_under_load(ctx):
    """A new prefix prints other text from rows of its own; going back to
    the old prefix continues the old rows."""
    db = ctx.shared_mariadb()
    a, b = prefix_of_own("PFA"), prefix_of_own("PFB")
    phases = [("P", mariadb_conf(db, {"P": {"prefix": p, "step": "200"}}))
              for p in (a, b, a)]
    with Workdir("ops-serial-prefix") as wd:
        got = run_phases(wd, phases, pinned(ms_utc(2026, 11, 23, 12)))
        no_repeat(got)
        check(all(s.startswith(b) for s in got[1]), "the new prefix is printed")


def test_zone_change_under_load(ctx):
    """The zone changed with the database's clock at 20:00 UTC: in Shanghai
    it is the 24th already, in New York still the 23rd. Each printed date
    has one row whatever the zone, so going back continues it."""
    db = ctx.shared_mariadb()
    pfx = prefix_of_own("TZN")
    phases = [("Z", mariadb_conf(db, {"Z": {"prefix": pfx, "step": "200", "zone": z}}))
              for z in ("UTC", "Asia/Shanghai", "America/New_York", "UTC")]
    with Workdir("ops-serial-zone") as wd:
        got = run_phases(wd, phases, pinned(ms_utc(2026, 11, 23, 20)))
        no_repeat(got)
        days = [sorted({s[len(pfx):len(pfx) + 8] for s in batch}) for batch in got]
        eq(days, [["20261123"], ["20261124"], ["20261123"], ["20261123"]],
           "the dates printed per zone")


def set_clock(path, offset_s):
    with open(path + ".tmp", "w") as f:
        f.write("%+.3f\n" % offset_s)
    os.rename(path + ".tmp", path)


def test_clock_step_during_reset_change(ctx):
    """The SQLite store reads the leafd process's clock as the database's;
    under libfaketime it steps across midnight and back while clients load,
    through a reset change (day -> month -> day) with restarts between.
    Nothing repeats: a period that comes back continues its own row, and
    each new reset's row starts above the rows of the other resets."""
    with Workdir("ops-serial-clock") as wd:
        ft = os.path.join(wd.path, "faketime.rc")
        midnight = ms_utc(2026, 11, 24)

        def at(ms):
            """The offset that puts the process's clock at ms now."""
            return (ms - now_ms()) / 1000.0
        # Well before midnight while leafd starts (however slowly), then
        # 30 s before it once it serves.
        set_clock(ft, at(midnight - 600000))
        env = {"LD_PRELOAD": faketime_preload(wd.path), "FAKETIME_TIMESTAMP_FILE": ft,
               "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "serial.count_max": "10", "serial.C.prefix": "CLK",
                "serial.C.step": "100", "segment.wait_ms": "2000"}

        def steps(taken):
            """Each step once the clients have printed what it is for."""
            wait_for(lambda: len(taken()) >= 20, "serials before midnight")
            set_clock(ft, at(midnight + 5000))          # forward past midnight
            wait_for(lambda: any(s[3:11] == "20261124" for s in taken()),
                     "a serial of the new day")
            n = len(taken())
            set_clock(ft, at(midnight - 2000))          # back into the old day
            wait_for(lambda: len(taken()) >= n + 20, "serials after the step back")
        got = []
        for k, reset in enumerate(("day", "month", "day")):
            d = wd.leafd(conf=dict(conf, **{"serial.C.reset": reset}), name="c%d" % k,
                         env=env).start()
            set_clock(ft, at(midnight - 30000))
            got.append(load(d, "C", during=steps))
            eq(d.stop(), 0, "phase %d: leafd exit status" % k)
            set_clock(ft, at(midnight - 600000))
        no_repeat(got)
        days = sorted({s[3:11] for batch in got for s in batch})
        eq(days, ["20261123", "20261124"], "both days printed")


def test_shape_change_same_text(ctx):
    """A definition changed so that another shape prints the same text:
    prefix X + yyyyMMdd vs X20 + yyMMdd (X2026112300000N both), and
    yyyyMMdd + 8 digits vs yyyyMMddHH + 6 digits at 00:30 (the hour 00 and
    the first two sequence digits). Their rows have different names, so
    each would count from 1: leafd refuses the start while the old shape's
    row is in a period that can still be printed, naming the row and the
    code, and starts once that period is over everywhere."""
    with Workdir("ops-serial-shape") as wd:
        base = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "serial.count_max": "10"}
        for k, (old, new) in enumerate([
                ({"prefix": "X"}, {"prefix": "X20", "pattern": "yyMMdd"}),
                ({"prefix": "Y", "digits": "8"},
                 {"prefix": "Y", "pattern": "yyyyMMddHH", "digits": "6"})]):
            conf = [dict(base, **{"serial.S.%s" % f: v for f, v in d.items()})
                    for d in (old, new)]
            env = pinned(ms_utc(2026, 11, 23, 0, 30))
            d = wd.leafd(conf=conf[0], name="old%d" % k, env=env).start()
            got = [load(d, "S")]
            eq(d.stop(), 0, "old definition: leafd exit status")
            d = wd.leafd(conf=conf[1], name="new%d" % k, env=env)
            must_refuse(d, "S", got, "case %d: the new shape started while the old "
                        "row's day can be printed" % k)
            row = "serial.%s.y4mod.0.%s:20261123" % (old["prefix"].lower(),
                                                      old.get("digits", "6"))
            check(row in d.log() and "serial.S" in d.log() and "prefix" in d.log(),
                  "the refusal names the row and the code:\n%s" % d.log())
            # Two days on, no zone prints the 23rd: it starts.
            d = wd.leafd(conf=conf[1], name="later%d" % k,
                         env=pinned(ms_utc(2026, 11, 25, 0, 30))).start()
            load(d, "S")
            eq(d.stop(), 0, "later: leafd exit status")


def test_pattern_reorder_after_period(ctx):
    """ddMMyy -> yyMMdd (issue 28, 3.3): the old pattern printed
    INV281126000001.. on 2026-11-28; its period is over long before
    2028-11-26, when yyMMdd prints INV281126 again from a row of its own.
    Waiting for the period to end does not help: leafd refuses the start
    on that date (and on every date before it), naming the row and the
    text, and starts once 2028-11-26 is over everywhere."""
    with Workdir("ops-serial-reorder") as wd:
        base = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "serial.count_max": "10", "serial.S.prefix": "INV"}
        old = dict(base, **{"serial.S.pattern": "ddMMyy"})
        new = dict(base, **{"serial.S.pattern": "yyMMdd"})
        d = wd.leafd(conf=old, name="old",
                     env=pinned(ms_utc(2026, 11, 28, 12))).start()
        got = [load(d, "S")]
        eq(d.stop(), 0, "old pattern: leafd exit status")
        check(any(s.startswith("INV281126") for s in got[0]),
              "the old pattern printed INV281126...: %r" % got[0][:3])
        for name, when in (("same_text", ms_utc(2028, 11, 26, 12)),
                           ("next_day", ms_utc(2026, 11, 30, 12))):
            d = wd.leafd(conf=new, name=name, env=pinned(when))
            must_refuse(d, "S", got, "%s: yyMMdd started while it can print "
                        "the old row's text again" % name)
            check("serial.inv.dmoy2.0.6:261128" in d.log() and "281126" in d.log()
                  and "prefix" in d.log(),
                  "the refusal names the row, the text and what to do:\n%s" % d.log())
        d = wd.leafd(conf=new, name="later",
                     env=pinned(ms_utc(2028, 11, 28, 12))).start()
        got.append(load(d, "S"))
        eq(d.stop(), 0, "later: leafd exit status")
        no_repeat(got)


def test_serial_row_restored(ctx):
    """A serial row going back in time while the node runs (issue 28, 3.2:
    a restored dump, a promoted replica that lacks the last commits; here
    the embedded SQLite store's row set back with sqlite3). The node got
    ranges up to its mark for that row; a load that comes back below it is
    refused in its transaction (nothing changes) and logged, naming the
    row, the database's value and the mark: no serial twice, the clients
    get 503 store_behind once the buffers drain (the node stays refused
    until leafd db-fence)."""
    with Workdir("ops-serial-restore") as wd:
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "serial.count_max": "10", "serial.S.prefix": "RSB",
                "serial.S.step": "50"}
        d = wd.leafd(conf=conf, name="node",
                     env=pinned(ms_utc(2026, 11, 23, 12))).start()
        got = [load(d, "S")]
        db = sqlite3.connect(os.path.join(wd.path, "leafd.db"), timeout=30)
        row, top = db.execute("SELECT biz_tag, max_id FROM leaf_alloc WHERE "
                              "description = 'serial period'").fetchone()
        db.execute("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = ?", (row,))
        db.commit()
        served, refused = [], [0]
        c = Client(d.port)
        end = time.time() + PHASE_S
        while time.time() < end:
            r = c.get("/serial/S?count=3&format=json")
            if r.status == 200:
                served.extend(r.json()["ids"])
            elif r.status == 503 and r.json().get("error") == "store_behind":
                refused[0] += 1
            else:
                raise TestFailure("after the restore: %r" % r)
        c.close()
        got.append(served)
        log = d.log()
        eq(d.stop(), 0, "leafd exit status")
        no_repeat(got)
        check(refused[0] > 0 and row in log and "mark" in log,
              "the refusal names the row and the mark (%d refused):\n%s"
              % (refused[0], log))
        db.close()


def test_snowflake_zone_change(ctx):
    """source = snowflake prints the ID's millisecond in local time. Moved
    from Asia/Tokyo (UTC+9) to Asia/Shanghai (UTC+8), the node prints the
    local times of the last hour again, with the same worker and sequence
    fields. Here the second start's clock is one hour on (libfaketime), so
    it prints exactly the local times the first printed: leafd refuses the
    start, naming both zones and what to do; with a new prefix it starts."""
    with Workdir("ops-serial-sfzone") as wd:
        ft = os.path.join(wd.path, "faketime.rc")
        set_clock(ft, 0)
        env = {"LD_PRELOAD": faketime_preload(wd.path), "FAKETIME_TIMESTAMP_FILE": ft,
               "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

        def conf(zone, prefix="SFZ"):
            return {"leaf.segment.enable": "false", "leaf.snowflake.enable": "true",
                    "snowflake.cache_file": os.path.join(wd.path, "sf.json"),
                    "snowflake.worker_id": "7", "serial.count_max": "1000",
                    "serial.Z.prefix": prefix, "serial.Z.source": "snowflake",
                    "serial.Z.pattern": "yyyyMMddHHmmssSSS", "serial.Z.zone": zone}
        d = wd.leafd(conf=conf("Asia/Tokyo"), name="tokyo", env=env).start()
        t1 = now_ms()
        got = [load(d, "Z")]
        eq(d.stop(), 0, "tokyo: leafd exit status")
        # One hour after t1 (fake), as Shanghai prints it: Tokyo's t1 again.
        set_clock(ft, 3600 - (now_ms() - t1) / 1000.0)
        d = wd.leafd(conf=conf("Asia/Shanghai"), name="shanghai", env=env)
        must_refuse(d, "Z", got, "the move to a zone behind started")
        log = d.log()
        check("serial.Z.zone: Asia/Shanghai (UTC+08:00 now) is behind Asia/Tokyo "
              "(UTC+09:00 now)" in log and "Change the prefix with the zone" in log,
              "the refusal names both zones and what to do:\n%s" % log)
        d = wd.leafd(conf=conf("Asia/Shanghai", "SFY"), name="newprefix",
                     env=env).start()
        got.append(load(d, "Z"))
        eq(d.stop(), 0, "new prefix: leafd exit status")
        no_repeat(got)


def test_rolling_upgrade_old_node(ctx):
    """A rolling upgrade from the key format before issue 20: a node of the
    old version still advances "CODE:20261123" alone (UPDATE max_id =
    max_id + step, then SELECT, as it did), while a new node loads from
    "serial.<shape>:20261123", whose floor reads the old row. Each new
    load raises the old row to the end of its range, so the old node's
    ranges and the new node's never meet."""
    db = ctx.shared_mariadb()
    code = prefix_of_own("UPG")
    old = "%s:20261123" % code
    db.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES "
           "('%s', 1, 20, 'serial period')" % old)
    with Workdir("ops-serial-upgrade") as wd:
        conf = mariadb_conf(db, {code: {"prefix": code, "step": "20"}})
        d = wd.leafd(conf=conf, env=pinned(ms_utc(2026, 11, 23, 12))).start()
        old_ranges = []

        def old_node(taken):
            # The old node's loads, interleaved with the new node's.
            while len(old_ranges) < 15 or len(taken()) < MIN_SERVED:
                m = int(db.sql("START TRANSACTION; UPDATE leaf_alloc SET max_id = "
                               "max_id + 20 WHERE biz_tag = '%s'; SELECT max_id FROM "
                               "leaf_alloc WHERE biz_tag = '%s'; COMMIT;"
                               % (old, old)).split()[0])
                old_ranges.append((m - 20, m))
        got = load(d, code, during=old_node)
        eq(d.stop(), 0, "leafd exit status")
    seqs = sorted(int(s[-6:]) for s in got)
    for lo, hi in old_ranges:
        both = [q for q in seqs if lo <= q < hi]
        check(not both, "the old node's range [%d, %d) was also the new node's: %s"
              % (lo, hi, both[:5]))
    no_repeat([got])
