#!/usr/bin/env python3
"""footprint.py: leafd's memory with many tags, and how soon it serves.

  footprint()  An SQLite file with FOOTPRINT_TAGS (10,000) rows of Leaf's
               table (sql/sqlite.sql), leafd on it (2 I/O threads, the
               defaults otherwise), one ID asked of FOOTPRINT_REQUEST tags
               (default: all, so each holds a segment), then VmRSS / VmHWM
               from /proc. Also the RSS of the embedded default after its
               first ID, for comparison.
  first_id()   leafd spawned in a fresh temp dir (the embedded default: it
               creates leafd.db and the snowflake cache file), /segment/demo
               polled as fast as one client can; the time from just before
               fork to the first 200.

bench/bench.py calls both; run alone: python3 bench/footprint.py
"""
import http.client
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from bbutil import free_port  # noqa: E402  (one copy, shared with the tests)
TAGS = int(os.environ.get("FOOTPRINT_TAGS", "10000"))
REQUEST = int(os.environ.get("FOOTPRINT_REQUEST", str(TAGS)))
CLIENTS = 8



def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


def kb(s):
    return int(s.split()[0])


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


REQ = b"GET /segment/demo HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def try_once(port):
    """One attempt: True once /segment/demo answered 200."""
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(REQ)
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(256)
            if not chunk:
                return False
            head += chunk
        return head.startswith(b"HTTP/1.1 200")
    except OSError:
        return False
    finally:
        s.close()


def first_id(leafd, workdir, keep=None):
    """ms from fork to the first 200 of /segment/demo on the embedded default.
    keep: a dict to receive the process' VmRSS after that answer."""
    d = tempfile.mkdtemp(prefix="first-", dir=workdir)
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen([leafd, "--listen.port=%d" % port, "--threads=2"], cwd=d,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            if try_once(port):
                ms = (time.perf_counter() - t0) * 1000
                break
            if proc.poll() is not None:
                raise RuntimeError("leafd exited with %d before serving" % proc.returncode)
            if time.perf_counter() - t0 > 30:
                raise RuntimeError("leafd did not serve /segment/demo within 30 s")
        if keep is not None:
            keep["rss_kb"] = kb(proc_status(proc.pid)["VmRSS"])
        return ms
    finally:
        stop(proc)


def make_db(path, n):
    with open(os.path.join(ROOT, "sql", "sqlite.sql")) as f:
        schema = f.read()
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.executemany("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, 1, 1000, ?)",
                   (("tag-%05d" % i, "footprint tag %d" % i) for i in range(n)))
    db.commit()
    db.close()


def ask_all(port, names, errors):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for name in names:
        c.request("GET", "/segment/" + name)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            errors.append("%s: %d %s" % (name, r.status, body.decode(errors="replace").strip()))
    c.close()


def footprint(leafd, workdir, threads=2):
    d = tempfile.mkdtemp(prefix="footprint-", dir=workdir)
    db = os.path.join(d, "tags.db")
    make_db(db, TAGS)
    port = free_port()
    proc = subprocess.Popen([leafd, "--listen.port=%d" % port, "--threads=%d" % threads,
                             "--segment.sqlite.path=%s" % db, "--segment.create_demo=false",
                             "--segment.wait_ms=60000", "--log.level=warn"],
                            cwd=d, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(d, "leafd.log"), "w"))
    try:
        end = time.time() + 30
        while not try_port(port):
            if proc.poll() is not None or time.time() > end:
                raise RuntimeError("leafd did not start on the 10,000-tag database")
            time.sleep(0.02)
        names = ["tag-%05d" % i for i in range(0, TAGS, max(1, TAGS // REQUEST))][:REQUEST]
        errors = []
        t0 = time.time()
        ths = [threading.Thread(target=ask_all, args=(port, names[i::CLIENTS], errors))
               for i in range(CLIENTS)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        if errors:
            # The answer says why (a 503's code and message); leafd's log
            # says what the database did.
            with open(os.path.join(d, "leafd.log")) as f:
                tail = f.readlines()[-5:]
            print("footprint: %d of %d requests failed, e.g. %s\nleafd's log ends:\n%s" % (
                len(errors), len(names), errors[0], "".join(tail)), file=sys.stderr)
        st = proc_status(proc.pid)
        idle = {}
        first_id(leafd, workdir, idle)
        return {"tags": TAGS, "requested": len(names) - len(errors), "threads": threads,
                "rss_kb": kb(st["VmRSS"]), "hwm_kb": kb(st["VmHWM"]),
                "load_seconds": time.time() - t0, "idle_rss_kb": idle["rss_kb"]}
    finally:
        stop(proc)


def try_port(port):
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    leafd = os.path.join(ROOT, "leafd")
    work = tempfile.mkdtemp(prefix="leafd-footprint-")
    try:
        starts = sorted(first_id(leafd, work) for _ in range(5))
        print("first ID after fork: %s ms (median %.1f)" % (
            ", ".join("%.1f" % x for x in starts), starts[2]))
        print(footprint(leafd, work))
    finally:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
