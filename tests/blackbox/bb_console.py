"""Black-box tests of the web console (/console): its HTTP headers, and the
page itself in a real browser (Debian's chromium + chromium-driver, driven
by python3-selenium) against a real leafd with segment and snowflake modes.

Screenshots go to build/test-output/console/ (desktop and 360 px wide).
Without chromium the browser tests are skipped, except under CI=1, where a
missing browser is a failure."""
import os
import shutil
import sqlite3
import sys
import tempfile
import time

from bbutil import ROOT, TestFailure, Workdir, check, eq, wait_for

TESTS = [
    "test_console_headers",
    "test_console_admin_listener",
    "test_console_in_browser",
    "test_console_admin_token_in_browser",
    "test_console_zookeeper_in_browser",
    "test_console_redis_in_browser",
    "test_console_tool_in_browser",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): the browser tests drive the page's JavaScript through the same
# routes that test_console_headers and the protocol suites run under ASan.
PLAIN_ONLY = {
    "test_console_in_browser",
    "test_console_admin_token_in_browser",
    "test_console_zookeeper_in_browser",
    "test_console_redis_in_browser",
    "test_console_tool_in_browser",
}

OUT = os.path.join(ROOT, "build", "test-output", "console")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TAGS = 10000
# Budget to show the Segments tab with 10,000 tags: from the click to the
# first rows on screen (fetching /cache, ~3.5 MB of JSON, parsing, sorting,
# painting), on the 2-core test VM under the load of the other tests.
RENDER_BUDGET_S = 5.0
WORKER = 37


def test_console_headers(ctx):
    with Workdir("console-hdr") as wd:
        d = wd.leafd().start()
        r = d.get("/")
        eq(r.status, 302, "/ redirects")
        eq(r.header("Location"), "/console", "redirect target")
        r = d.get("/console")
        eq(r.status, 200, "/console")
        eq(r.header("Content-Type"), "text/html; charset=utf-8", "page type")
        csp = r.header("Content-Security-Policy") or ""
        check("script-src 'self'" in csp and "unsafe-inline" not in csp and
              "default-src 'none'" in csp, "CSP without inline script: %r" % csp)
        eq(r.header("X-Content-Type-Options"), "nosniff", "nosniff")
        eq(r.header("Cache-Control"), "no-cache", "the page is revalidated")
        html = r.text
        check("<script>" not in html and "style=" not in html and " on" + "click=" not in html,
              "no inline script or style in the page")
        import re
        assets = re.findall(r'(?:href|src)="(/console/[^"]+)"', html)
        check(len(assets) == 3, "the page links 3 assets: %r" % assets)
        total = len(r.body)
        for a in assets:
            check(re.match(r"^/console/[a-z]+\.[0-9a-f]{12}\.(js|css|svg)$", a),
                  "asset name carries a content hash: %s" % a)
            ra = d.get(a)
            eq(ra.status, 200, "asset %s" % a)
            eq(ra.header("Cache-Control"), "public, max-age=31536000, immutable",
               "asset cache control")
            eq(ra.header("X-Content-Type-Options"), "nosniff", "asset nosniff")
            check(ra.header("Content-Security-Policy"), "asset CSP")
            total += len(ra.body)
            if a.endswith(".js"):
                eq(ra.header("Content-Type"), "text/javascript; charset=utf-8", "js type")
                check("fetch(" in ra.text and "?token=" not in ra.text,
                      "the script never puts the token in a URL")
        check(total < 100 * 1024, "console under 100 KB: %d bytes" % total)
        eq(d.get("/console/").status, 200, "/console/ too")
        r = d.get("/console/app.js")
        eq(r.status, 404, "unversioned name")
        eq(r.json()["error"], "not_found", "404 code")
        r = d.client.request("HEAD", "/console")
        eq((r.status, r.body), (200, b""), "HEAD")
        r = d.client.request("POST", "/console")
        eq(r.status, 405, "POST")
        j = d.get("/console/about.json").json()
        check(j["version"] and j["config"] is None and j["admin_token"] is False,
              "about.json: %r" % j)


def test_console_admin_listener(ctx):
    """With admin.listen.port the console (and its data) is on the admin
    port only; admin.token guards about.json like the other admin pages."""
    with Workdir("console-admin") as wd:
        from bbutil import Client, free_port
        ap = free_port()
        d = wd.leafd(flags=["--admin.listen.port=%d" % ap,
                            "--admin.listen.address=127.0.0.1",
                            "--admin.token=s3cret-console-token"]).start()
        eq(d.get("/console").status, 404, "public port: no console")
        eq(d.get("/").status, 404, "public port: no redirect")
        adm = Client(ap)
        wait_for(lambda: adm.get("/health").status == 200, what="admin listener")
        eq(adm.get("/").status, 302, "admin port redirects /")
        eq(adm.get("/console").status, 200, "admin port serves the console")
        eq(adm.get("/console/about.json").status, 401, "about.json without token")
        eq(adm.get("/console/about.json", {"Authorization": "Bearer nope-nope"}).status, 403,
           "about.json with a wrong token")
        r = adm.get("/console/about.json", {"Authorization": "Bearer s3cret-console-token"})
        eq(r.status, 200, "about.json with the token")
        adm.close()


# ---- the browser ----

def browser_or_skip():
    """A headless chromium, or None (skip) when none is installed and CI is
    not set."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        # Debian's python3-selenium, when python3 is not Debian's own.
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import selenium  # noqa: F401
        except ImportError:
            missing.append("python3-selenium")
    if missing:
        if os.environ.get("CI", "") not in ("", "0", "false"):
            raise TestFailure("CI=1 and the browser test cannot run: missing %s "
                              "(sh .ci/deps.sh test installs them)" % ", ".join(missing))
        print("  skipped: missing %s (sh .ci/deps.sh test)" % ", ".join(missing))
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    profile = tempfile.mkdtemp(prefix="leafd-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--no-first-run", "--disable-extensions",
              "--user-data-dir=%s" % profile, "--window-size=1366,900"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    drv._leafd_profile = profile
    return drv


def quit_browser(drv):
    try:
        drv.quit()
    finally:
        shutil.rmtree(drv._leafd_profile, ignore_errors=True)


def console_errors(drv, allow=()):
    """Errors the page logged (console.error, exceptions, CSP refusals,
    failed loads), except those containing a string of allow."""
    out = []
    for e in drv.get_log("browser"):
        if e.get("level") in ("SEVERE", "ERROR") and not any(a in e["message"] for a in allow):
            out.append(e["message"])
    return out


def js(drv, script, *args):
    return drv.execute_script(script, *args)


def text_of(drv, css):
    return js(drv, "var e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)


def wait_text(drv, css, pred, what, timeout=60):   # returns once true; long for a busy machine
    return wait_for(lambda: (lambda t: t if t is not None and pred(t) else None)(text_of(drv, css)),
                    timeout=timeout, what=what)


def shot(drv, name, width=None):
    os.makedirs(OUT, exist_ok=True)
    if width:
        drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": True})
        time.sleep(0.4)
    h = js(drv, "return Math.min(document.documentElement.scrollHeight, 2400);")
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                        {"width": width or 1366, "height": max(h, 800), "deviceScaleFactor": 1,
                         "mobile": bool(width)})
    time.sleep(0.3)
    drv.save_screenshot(os.path.join(OUT, name + ".png"))
    drv.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def tab(drv, name):
    drv.find_element("css selector", 'nav a[data-tab="%s"]' % name).click()
    wait_for(lambda: js(drv, "return !document.getElementById(arguments[0]).hidden;", name),
             what="tab %s" % name)


def thousands(s):
    s = str(s)
    out = ""
    while len(s) > 3:
        out = "," + s[-3:] + out
        s = s[:-3]
    return s + out


def seed_tags(wd, n):
    """leaf_alloc with demo and n tags t00000.., written before leafd starts."""
    con = sqlite3.connect(os.path.join(wd.path, "leafd.db"))
    with open(os.path.join(ROOT, "sql", "sqlite.sql")) as f:
        con.executescript(f.read())
    con.execute("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
                "VALUES ('demo', 1, 1000, 'leafd demo tag')")
    con.executemany("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) VALUES (?,?,?,?)",
                    (("t%05d" % i, 1 + i * 1000000, 100 + i % 900, "tag %d" % i)
                     for i in range(n)))
    con.commit()
    con.close()


def parsed_fields(drv):
    return js(drv, """
        var o = {};
        document.querySelectorAll('#parse-fields tr[data-name]').forEach(function (tr) {
          o[tr.getAttribute('data-name')] = tr.querySelector('[data-value]').getAttribute('data-value');
        });
        o.bits = Array.prototype.map.call(document.querySelectorAll('#parse-out .bits .b'),
                                          function (b) { return b.textContent; }).join('');
        return o;""")


def parse_in_page(drv, value):
    inp = drv.find_element("css selector", "#parse-input")
    inp.clear()
    inp.send_keys(value + "\n")
    wait_for(lambda: js(drv, "return document.querySelectorAll('#parse-fields tr[data-name]').length"),
             what="the parse result")
    return parsed_fields(drv)


def check_against_decode(drv, d, sid, client=None):
    f = parse_in_page(drv, sid)
    dec = (client or d.client).get("/snowflake/decode/" + sid).json()
    eq(f["timestamp"], str(dec["timestamp"]), "diagram timestamp vs /snowflake/decode")
    eq(f["worker_id"], str(dec["worker_id"]), "diagram worker vs decode")
    eq(f["sequence"], str(dec["sequence"]), "diagram sequence vs decode")
    if "datacenter_id" in dec:
        eq(f["datacenter_id"], str(dec["datacenter_id"]), "diagram datacenter vs decode")
    eq(f["bits"], format(int(sid), "064b"), "the diagram's 64 bits")
    return f, dec


def test_console_in_browser(ctx):
    with Workdir("console") as wd:
        seed_tags(wd, TAGS)
        d = wd.leafd(flags=["--snowflake.worker_id=%d" % WORKER]).start()
        wait_for(lambda: d.get("/health").json()["segment"]["tags"] == TAGS + 1,
                 what="leafd loaded every tag")
        # Traffic, so that the charts and the per-tag numbers move.
        for _ in range(20):
            d.get("/segment/demo?count=100")
            d.get("/snowflake?count=50")
        for i in (42, 4242):
            d.get("/segment/t%05d?count=7" % i)
        drv = browser_or_skip()
        if drv is None:
            return
        try:
            base = "http://127.0.0.1:%d" % d.port
            drv.get(base + "/")
            wait_for(lambda: drv.current_url.endswith("/console"), what="/ -> /console")
            # Overview: the real numbers.
            wait_text(drv, '#ov-segment [data-k="tags"]', lambda t: t == thousands(TAGS + 1),
                      "tag count %s on the overview" % thousands(TAGS + 1))
            wait_text(drv, '#ov-snowflake [data-k="worker"]', lambda t: t == str(WORKER),
                      "worker ID on the overview")
            wait_text(drv, '#ov-server [data-k="version"]', lambda t: t[0].isdigit(), "version")
            eq(text_of(drv, '#ov-segment [data-k="db"]'), "up", "database state")
            for _ in range(6):                      # traffic between samples
                d.get("/segment/demo?count=500")
                d.get("/snowflake?count=200")
                time.sleep(0.5)
            wait_text(drv, "#now-ids", lambda t: "segment:" in t and "segment: 0/s" not in t,
                      "a non-zero segment IDs/s figure", timeout=60)
            shot(drv, "overview-desktop")

            # Segments: 10,000 tags, virtualised.
            t0 = time.time()
            tab(drv, "segments")
            wait_text(drv, "#seg-summary", lambda t: t.startswith(thousands(TAGS + 1) + " tags"),
                      "the segments summary", timeout=RENDER_BUDGET_S + 10)
            wait_for(lambda: js(drv, "return document.querySelectorAll('#seg-table .vt-row').length > 5"),
                     what="segment rows")
            took = time.time() - t0
            check(took <= RENDER_BUDGET_S, "10,000 tags rendered in %.2fs, budget %.1fs" % (took, RENDER_BUDGET_S))
            print("  10,001 tags rendered in %.2fs (budget %.1fs)" % (took, RENDER_BUDGET_S))
            nrows = js(drv, "return document.querySelectorAll('#seg-table .vt-row').length")
            check(nrows < 100, "virtualised: %d row elements for %d tags" % (nrows, TAGS + 1))
            # Scroll to the end: the last tag is drawn, still few rows.
            js(drv, "var t = document.getElementById('seg-table'); t.scrollTop = t.scrollHeight;")
            wait_for(lambda: js(drv, "return !!document.querySelector('#seg-table .vt-row[data-key=\"t09999\"]')"),
                     what="the last tag after scrolling")
            check(js(drv, "return document.querySelectorAll('#seg-table .vt-row').length") < 100,
                  "still virtualised after scrolling")
            # A tag's max, as /cache has it.
            cache = {t["key"]: t for t in d.get("/cache").json()["tags"]}
            t42 = cache["t00042"]
            cur = t42["segments"][t42["pos"]]
            f = drv.find_element("css selector", "#seg-filter")
            f.send_keys("t00042")
            wait_for(lambda: js(drv, "return document.querySelectorAll('#seg-table .vt-row').length") == 1,
                     what="the filter to leave one row")
            row = text_of(drv, '#seg-table .vt-row[data-key="t00042"]')
            check(thousands(cur["max"]) in row, "t00042's max %s in its row: %r" % (thousands(cur["max"]), row))
            check(thousands(t42["step"]) in row, "t00042's step in its row: %r" % row)
            js(drv, "arguments[0].scrollIntoView()", f)
            shot(drv, "segments-filtered-desktop")
            f.clear()
            f.send_keys(" ")
            f.send_keys("\b")
            wait_for(lambda: js(drv, "return document.querySelectorAll('#seg-table .vt-row').length") > 5,
                     what="the filter cleared")
            # Sort by issued, most first: demo has the most.
            js(drv, "var t = document.getElementById('seg-table'); t.scrollTop = 0;")
            hdr = [b for b in drv.find_elements("css selector", "#seg-table .vt-head button") if b.text.startswith("issued")][0]
            hdr.click()
            wait_for(lambda: js(drv, "var r = Array.prototype.slice.call(document.querySelectorAll('#seg-table .vt-row'))"
                                     ".sort(function (a, b) { return a.style.transform.localeCompare(b.style.transform); });"
                                     "return document.querySelector('#seg-table .vt-row[data-key=\"demo\"]') && "
                                     "document.querySelector('#seg-table .vt-row[data-key=\"demo\"]').style.transform === 'translateY(0px)';"),
                     what="demo first when sorted by issued")
            eq(hdr.get_attribute("aria-sort"), "descending", "sort state")
            shot(drv, "segments-desktop")
            shot(drv, "segments-360", width=360)

            # Database.
            tab(drv, "db")
            wait_text(drv, "#db-summary", lambda t: t.startswith(thousands(TAGS + 1) + " rows"), "db rows")
            check(js(drv, "return document.querySelectorAll('#db-table .vt-row').length") < 100, "db virtualised")
            check("update_time" in text_of(drv, "#db-table .vt-head"), "update_time column")
            shot(drv, "db-desktop")

            # Snowflake.
            tab(drv, "snowflake")
            wait_text(drv, '#sf-worker [data-k="worker"]', lambda t: t == str(WORKER), "worker ID on the snowflake tab")
            eq(text_of(drv, '#sf-worker [data-k="source"]'), "static", "worker source")
            check("timestamp" in text_of(drv, "#sf-layout") and "41 bits" in text_of(drv, "#sf-layout"),
                  "layout diagram: %r" % text_of(drv, "#sf-layout"))
            check(text_of(drv, '#sf-clock [data-k="fence"]').split(" ")[0].isdigit(), "fence shown")
            shot(drv, "snowflake-desktop")

            # The tool: parse an issued ID and a fixed one; check against the decoder.
            tab(drv, "tool")
            issued = d.get("/snowflake").text.strip()
            f, dec = check_against_decode(drv, d, issued)
            eq(f["worker_id"], str(WORKER), "issued ID's worker")
            wait_text(drv, "#parse-check", lambda t: "agrees" in t, "the page's own cross-check")
            check_against_decode(drv, d, "2124735660903366656")
            # Preview round trip.
            when = "2027-03-04T05:06:07.089Z"
            for sel, v in (("#gen-time", when), ("#gen-worker", "513"), ("#gen-seq", "4095")):
                e = drv.find_element("css selector", sel)
                e.clear()
                e.send_keys(v)
            drv.find_element("css selector", "#gen-form button[type=submit]").click()
            pid = wait_text(drv, "#gen-id", lambda t: t.isdigit(), "a preview ID")
            label = text_of(drv, "#gen-out .label")
            check("not issued" in label.lower() and "never use" in label.lower(),
                  "the preview is labelled: %r" % label)
            dec = d.get("/snowflake/decode/" + pid).json()
            eq((dec["time"], dec["worker_id"], dec["sequence"]), ("2027-03-04T05:06:07.089Z", 513, 4095),
               "preview decoded by leafd")
            # Range for BETWEEN.
            for sel, v in (("#range-from", "2026-01-01T00:00:00Z"), ("#range-to", "2026-01-01T00:00:00.999Z")):
                e = drv.find_element("css selector", sel)
                e.clear()
                e.send_keys(v)
            drv.find_element("css selector", "#range-form button[type=submit]").click()
            lo = wait_text(drv, '#range-out [data-k="min"]', lambda t: t.isdigit(), "the smallest ID")
            hi = text_of(drv, '#range-out [data-k="max"]')
            dlo = d.get("/snowflake/decode/" + lo).json()
            dhi = d.get("/snowflake/decode/" + hi).json()
            eq((dlo["time"], dlo["worker_id"], dlo["sequence"]), ("2026-01-01T00:00:00.000Z", 0, 0), "smallest")
            eq((dhi["time"], dhi["worker_id"], dhi["sequence"]), ("2026-01-01T00:00:00.999Z", 1023, 4095), "largest")
            check(int(lo) < int(hi), "lo < hi")
            check(("BETWEEN %s AND %s" % (lo, hi)) in text_of(drv, "#range-out .sql"), "SQL text")
            # UUIDv7 and ULID, parsed in the page.
            f = parse_in_page(drv, "01890a5d-ac96-774b-bcce-b302099a8057")
            eq(f["timestamp"], str(0x01890a5dac96), "UUIDv7 time")
            f = parse_in_page(drv, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
            crock = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
            ulid_ms = 0
            for ch in "01ARZ3NDEK":
                ulid_ms = ulid_ms * 32 + crock.index(ch)
            eq(f["timestamp"], str(ulid_ms), "ULID time")
            # Back to a snowflake ID for the screenshots.
            parse_in_page(drv, issued)
            drv.find_element("css selector", "#gen-form button[type=submit]").click()
            shot(drv, "tool-desktop")
            shot(drv, "tool-360", width=360)
            tab(drv, "overview")
            time.sleep(0.5)
            shot(drv, "overview-360", width=360)

            # Keyboard: the tabs are links, reachable with Tab, and Enter opens one.
            drv.find_element("css selector", "body").click()
            from selenium.webdriver.common.keys import Keys
            from selenium.webdriver.common.action_chains import ActionChains
            ActionChains(drv).send_keys(Keys.TAB).perform()
            focused = []
            for _ in range(6):
                focused.append(js(drv, "return document.activeElement.getAttribute('data-tab')"))
                ActionChains(drv).send_keys(Keys.TAB).perform()
            check([x for x in focused if x][:5] == ["overview", "segments", "db", "snowflake", "tool"],
                  "Tab walks the section links: %r" % focused)

            errs = console_errors(drv)
            check(not errs, "the browser console logged errors:\n%s" % "\n".join(errs))
        finally:
            quit_browser(drv)


def test_console_admin_token_in_browser(ctx):
    """admin.token set, admin pages on their own port, a 5+5 datacenter
    layout: the page asks for the token, says a wrong one is wrong, and
    works with the right one."""
    from bbutil import Client, free_port
    with Workdir("console-token") as wd:
        seed_tags(wd, 0)
        con = sqlite3.connect(os.path.join(wd.path, "leafd.db"))
        con.execute("INSERT INTO leaf_alloc(biz_tag, max_id, step) VALUES ('broken', 1, 0)")
        con.commit()
        con.close()
        ap = free_port()
        tok = "right-token-%d" % os.getpid()
        d = wd.leafd(flags=["--admin.listen.port=%d" % ap, "--admin.listen.address=127.0.0.1",
                            "--admin.token=" + tok, "--snowflake.datacenter_bits=5",
                            "--snowflake.worker_bits=5", "--snowflake.datacenter_id=3",
                            "--snowflake.worker_id=9"]).start()
        adm = Client(ap)
        wait_for(lambda: adm.get("/health").status == 200, what="admin listener")
        drv = browser_or_skip()
        if drv is None:
            return
        try:
            drv.get("http://127.0.0.1:%d/console" % ap)
            wait_for(lambda: js(drv, "return !document.getElementById('auth').hidden"), what="the token prompt")
            check("admin token" in text_of(drv, "#auth-msg"), "prompt text")
            inp = drv.find_element("css selector", "#auth-token")
            inp.send_keys("wrong-token-123\n")
            wait_text(drv, "#auth-msg", lambda t: "Wrong admin token" in t, "the wrong-token message")
            eq(text_of(drv, "#status-line"), "Wrong admin token", "status line")
            check(js(drv, "return !document.getElementById('auth').hidden"), "prompt shown again")
            shot(drv, "token-wrong-desktop")
            drv.find_element("css selector", "#auth-token").send_keys(tok + "\n")
            wait_text(drv, '#ov-snowflake [data-k="worker"]', lambda t: t == "9", "worker ID with the token")
            check(js(drv, "return document.getElementById('auth').hidden"), "prompt gone")
            eq(js(drv, "return sessionStorage.getItem('leafd.admin_token')"), tok, "kept for the tab")
            eq(js(drv, "return localStorage.length"), 0, "nothing in localStorage")
            check(tok not in drv.current_url, "token not in the URL")
            # Reload: the tab remembers it, no prompt.
            drv.refresh()
            wait_text(drv, '#ov-segment [data-k="tags"]', lambda t: t == "2", "tags after reload")
            # A 503 (the broken row) and some traffic: the 503 table and the
            # live charts.
            r = d.get("/segment/broken")
            eq((r.status, r.json()["error"]), (503, "bad_leaf_alloc_row"), "the broken row's 503")
            end = time.time() + 30
            while time.time() < end:
                d.get("/segment/demo?count=%d" % (200 + int(time.time() * 7) % 300))
                d.get("/snowflake?count=%d" % (50 + int(time.time() * 5) % 100))
                time.sleep(0.05)
                if js(drv, "return Number(document.getElementById('chart-ids').getAttribute('data-points'))") >= 6:
                    break
            wait_text(drv, "#ov-503 tbody", lambda t: "http segment" in t and "bad_leaf_alloc_row" in t,
                      "the segment 503 in the 503 table")
            row = js(drv, "return Array.prototype.map.call(document.querySelectorAll('#ov-503 tbody td'), "
                          "function (td) { return td.textContent; });")
            eq(row, ["http segment", "bad_leaf_alloc_row", "1", "1"], "503 table row")
            shot(drv, "overview-live-desktop")
            check(js(drv, "return document.getElementById('auth').hidden"), "no prompt after reload")
            # The datacenter layout in the tool, against the public decoder.
            tab(drv, "tool")
            sid = d.get("/snowflake").text.strip()
            f, dec = check_against_decode(drv, d, sid)
            eq((f["datacenter_id"], f["worker_id"]), ("3", "9"), "datacenter and worker")
            tab(drv, "snowflake")
            wait_text(drv, '#sf-worker [data-k="datacenter"]', lambda t: t == "3", "datacenter ID")
            check("datacenter" in text_of(drv, "#sf-layout"), "layout shows the datacenter field")
            shot(drv, "snowflake-datacenter-desktop")
            # The only errors: the 401/403 answers before the right token,
            # and /snowflake/decode, which the admin listener does not serve.
            errs = console_errors(drv, allow=("401", "403", "/snowflake/decode/"))
            check(not errs, "the browser console logged errors:\n%s" % "\n".join(errs))
        finally:
            quit_browser(drv)
            adm.close()


def test_console_zookeeper_in_browser(ctx):
    """Snowflake only, worker IDs from ZooKeeper: the ZooKeeper session,
    the registration and the heartbeat age; segment mode shown as off, and
    its pages never asked for (no 404 in the browser console)."""
    with Workdir("console-zk") as wd:
        zk = wd.zookeeper()
        d = wd.leafd(conf={"leaf.snowflake.enable": "true", "leaf.segment.enable": "false",
                           "leaf.name": "bbconsole", "snowflake.ip": "127.0.0.1",
                           "leaf.snowflake.zk.address": zk.address,
                           "snowflake.cache_file": os.path.join(wd.path, "sf.json")}).start()
        st = wait_for(lambda: (lambda j: j if j.get("heartbeat_age_ms") is not None else None)(
            d.get("/snowflake/state").json()), what="a first heartbeat")
        # a new forever: /health is 503 until its creation + the gate passes
        wait_for(lambda: d.get("/health").status == 200, 30, step=0.1, what="healthy")
        drv = browser_or_skip()
        if drv is None:
            return
        try:
            drv.get("http://127.0.0.1:%d/console#segments" % d.port)
            wait_text(drv, "#seg-summary", lambda t: "off on this node" in t, "segment mode off")
            tab(drv, "overview")
            wait_text(drv, '#ov-snowflake [data-k="zk"]', lambda t: t.startswith("connected"),
                      "ZooKeeper connected on the overview")
            eq(text_of(drv, '#ov-snowflake [data-k="worker"]'), str(st["worker_id"]), "worker ID")
            rng = text_of(drv, '#ov-snowflake [data-k="range"]')
            check(rng.startswith("0–") and rng.endswith("(the whole field)"),
                  "the worker ID range (snowflake.worker_id_min/_max): %r" % rng)
            eq(text_of(drv, "#ov-segment dd"), "off on this node", "segment card")
            tab(drv, "snowflake")
            wait_text(drv, '#sf-worker [data-k="source"]', lambda t: t == "zookeeper", "source")
            hb = text_of(drv, '#sf-worker [data-k="heartbeat"]')
            check(hb.endswith(" s") or hb.endswith(" ms"), "heartbeat age: %r" % hb)
            check(st["zk_node"] in text_of(drv, "#sf-worker"), "the registration %s" % st["zk_node"])
            check(st["zk_server"] and st["zk_server"].endswith(":%d" % zk.port),
                  "zk_server in /snowflake/state: %r" % st.get("zk_server"))
            check("to member " + st["zk_server"] in text_of(drv, '#sf-worker [data-k="zkmember"]'),
                  "the ensemble member in use on the snowflake page")
            eq(text_of(drv, '#sf-worker [data-k="failovers"]'), str(st["store_failovers"]),
               "the store failovers seen")
            eq(text_of(drv, '#sf-worker [data-k="range"]'), rng, "the range on the snowflake page")
            shot(drv, "snowflake-zookeeper-desktop")
            errs = console_errors(drv)
            check(not errs, "the browser console logged errors:\n%s" % "\n".join(errs))
        finally:
            quit_browser(drv)


def test_console_redis_in_browser(ctx):
    """Snowflake only, worker IDs from Redis: the lease, the fence Redis
    holds and the clock against Redis's on the snowflake tab, the store on
    the overview, and no "undefined" anywhere (the console once printed
    ZooKeeper's fields for every source)."""
    with Workdir("console-redis") as wd:
        # epoch 0: a new store's first claim would wait 9 s (workerid_redis.c)
        r = wd.redis(epoch0=[(0, "leafd:snowflake:")])
        d = wd.leafd(conf={"leaf.snowflake.enable": "true", "leaf.segment.enable": "false",
                           "snowflake.ip": "127.0.0.1", "snowflake.worker_source": "redis",
                           "snowflake.redis.url": "redis://127.0.0.1:%d" % r.port,
                           "snowflake.release_on_stop": "true",
                           "snowflake.cache_file": os.path.join(wd.path, "sf.json")}).start()
        st = wait_for(lambda: (lambda j: j if j.get("heartbeat_age_ms") is not None and
                               j.get("lease_expires_ms") else None)(
            d.get("/snowflake/state").json()), what="a first heartbeat")
        drv = browser_or_skip()
        if drv is None:
            return
        try:
            drv.get("http://127.0.0.1:%d/console#overview" % d.port)
            wait_text(drv, '#ov-snowflake [data-k="worker"]', lambda t: t == str(st["worker_id"]),
                      "worker ID on the overview")
            eq(text_of(drv, '#ov-snowflake [data-k="store"]'), "redis", "store on the overview")
            tab(drv, "snowflake")
            wait_text(drv, '#sf-worker [data-k="source"]', lambda t: t == "redis", "source")
            lease = text_of(drv, '#sf-worker [data-k="lease"]')
            check(lease.startswith("held in redis") and "lease until" in lease and
                  "released on a clean stop" in lease, "lease: %r" % lease)
            fence = text_of(drv, '#sf-worker [data-k="storefence"]')
            check(fence.split()[0].isdigit() and int(fence.split()[0]) >= st["store_fence_ms"],
                  "fence in redis: %r (state said %d)" % (fence, st["store_fence_ms"]))
            off = text_of(drv, '#sf-worker [data-k="storeoffset"]')
            check("round trip" in off, "clock against redis: %r" % off)
            for sel in ("#sf-worker", "#ov-snowflake", "#sf-clock"):
                txt = text_of(drv, sel)
                check("undefined" not in txt and "NaN" not in txt, "%s: %r" % (sel, txt))
            shot(drv, "snowflake-redis-desktop")
            errs = console_errors(drv)
            check(not errs, "the browser console logged errors:\n%s" % "\n".join(errs))
        finally:
            quit_browser(drv)


def tool_conf(wd):
    """Segment and snowflake modes, the demo tag's strings after ord_, a
    concealed tag sec and a concealed serial code PAY, each with its key
    file (0600, as leafd requires)."""
    import secrets
    keys = []
    for name in ("pay.key", "sec.key"):
        keys.append(os.path.join(wd.path, name))
        fd = os.open(keys[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
        os.close(fd)
    seed_tags(wd, 0)
    con = sqlite3.connect(os.path.join(wd.path, "leafd.db"))
    con.execute("INSERT INTO leaf_alloc(biz_tag, max_id, step) VALUES ('sec', 1, 1000)")
    con.commit()
    con.close()
    return {"leaf.segment.enable": "true", "leaf.snowflake.enable": "true",
            "snowflake.cache_file": os.path.join(wd.path, "sf.json"),
            "segment.prefix.ord": "demo", "serial.PAY.prefix": "PAY",
            "serial.PAY.digits": "6", "serial.PAY.conceal": "true",
            "serial.PAY.key_file": keys[0], "segment.conceal": "sec",
            "segment.conceal_key_file": keys[1]}


def generate_in_page(drv, kind, count, name=None, enc=None):
    """The tool's Generate form: the values it lists."""
    from selenium.webdriver.support.ui import Select
    Select(drv.find_element("css selector", "#issue-kind")).select_by_value(kind)
    if name is not None:
        e = drv.find_element("css selector", "#issue-name")
        e.clear()
        e.send_keys(name)
    if enc is not None:
        Select(drv.find_element("css selector", "#issue-enc")).select_by_value(enc)
    e = drv.find_element("css selector", "#issue-count")
    e.clear()
    e.send_keys(str(count))
    js(drv, "var o = document.getElementById('issue-out'); while (o.firstChild) o.removeChild(o.firstChild);")
    drv.find_element("css selector", "#issue-form button[type=submit]").click()
    wait_for(lambda: js(drv, "return document.querySelector('#issue-list, #issue-out .tool-error, #issue-out .error') !== null"),
             what="the generated %s IDs" % kind)
    err = text_of(drv, "#issue-out .tool-error, #issue-out .error")
    check(err is None, "generating %s: the tool shows an error: %r" % (kind, err))
    return js(drv, "return Array.prototype.map.call(document.querySelectorAll('#issue-list li'), "
                   "function (li) { return li.getAttribute('data-value'); });")


def admin_parse_in_page(drv, kind, name, value):
    """The tool's Parse form for an admin route: the fields shown (by
    data-k), or the error box's status, code and text."""
    from selenium.webdriver.support.ui import Select
    Select(drv.find_element("css selector", "#parse-kind")).select_by_value(kind)
    e = drv.find_element("css selector", "#parse-name")
    e.clear()
    e.send_keys(name)
    js(drv, "var o = document.getElementById('parse-out'); while (o.firstChild) o.removeChild(o.firstChild);")
    inp = drv.find_element("css selector", "#parse-input")
    inp.clear()
    inp.send_keys(value + "\n")
    wait_for(lambda: js(drv, "return document.querySelector('#parse-server, #parse-out .tool-error, #parse-out .error') !== null"),
             what="the %s result" % kind)
    return js(drv, """
        var o = {}, box = document.querySelector('#parse-out .tool-error');
        if (box) return {status: box.getAttribute('data-status'), error: box.getAttribute('data-error'),
                         text: box.textContent};
        document.querySelectorAll('#parse-server dd[data-k]').forEach(function (dd) {
          o[dd.getAttribute('data-k')] = dd.textContent; });
        o.title = document.querySelector('#parse-server > p').textContent;
        return o;""")


def test_console_tool_in_browser(ctx):
    """The tool's Generate and Parse: IDs of several kinds issued through the
    node's routes (and checked with its decoders), a concealed serial decoded
    with the admin token (the counter shown is the route's), the concealed
    segment route (or its error, on a leafd without it); then a node without
    admin.token: the page says 403 admin_required, and no counter."""
    with Workdir("console-tool") as wd:
        tok = "tool-token-%d" % os.getpid()
        conf = tool_conf(wd)
        d = wd.leafd(conf=conf, flags=["--admin.token=" + tok]).start()
        auth = {"Authorization": "Bearer " + tok}
        drv = browser_or_skip()
        if drv is None:
            return
        try:
            drv.get("http://127.0.0.1:%d/console#tool" % d.port)
            wait_for(lambda: js(drv, "return !document.getElementById('auth').hidden"), what="the token prompt")
            drv.find_element("css selector", "#auth-token").send_keys(tok + "\n")
            wait_for(lambda: js(drv, "return document.getElementById('auth').hidden"), what="the token taken")

            # Segment IDs as base62 strings after the tag's prefix.
            seg = generate_in_page(drv, "segment", 3, name="demo", enc="base62")
            eq(len(seg), 3, "3 segment IDs: %r" % seg)
            nums = []
            for v in seg:
                check(v.startswith("ord_") and len(v) == 15, "a base62 segment string: %r" % v)
                j = d.get("/segment/decode/" + v).json()
                eq(j.get("biz_tag"), "demo", "%s names demo" % v)
                nums.append(int(j["id"]))
            eq(nums, sorted(set(nums)), "distinct and increasing: %r" % nums)
            # Snowflake IDs, decimal: this node's, increasing.
            sf = generate_in_page(drv, "snowflake", 4, enc="dec")
            eq(len(sf), 4, "4 snowflake IDs")
            eq([int(x) for x in sf], sorted(set(int(x) for x in sf)), "increasing: %r" % sf)
            eq(d.get("/snowflake/decode/" + sf[0]).status, 200, "leafd decodes %s" % sf[0])
            # A segment string pasted back: /segment/decode through the page.
            inp = drv.find_element("css selector", "#parse-input")
            inp.clear()
            inp.send_keys(seg[0] + "\n")
            wait_text(drv, '#parse-server [data-k="id"]', lambda t: t == str(nums[0]),
                      "the segment string's number in the page")
            eq(text_of(drv, '#parse-server [data-k="biz_tag"]'), "demo", "its tag")

            # A snowflake string without a prefix (base32, 13 characters):
            # both readings, the snowflake one with its diagram.
            sf32 = generate_in_page(drv, "snowflake", 1, enc="base32")
            eq(len(sf32[0]), 13, "a base32 snowflake string: %r" % sf32)
            dec32 = d.get("/snowflake/decode/" + sf32[0]).json()
            inp = drv.find_element("css selector", "#parse-input")
            inp.clear()
            inp.send_keys(sf32[0] + "\n")
            wait_text(drv, "#parse-check", lambda t: "agrees" in t, "the string's diagram checked by leafd")
            eq(parsed_fields(drv)["bits"], format(int(dec32["id"]), "064b"), "the string's 64 bits")
            eq(text_of(drv, '#parse-server [data-k="encoding"]'), "base32", "the segment reading too")
            shot(drv, "tool-idstring-desktop")

            # A concealed serial, then its Parse button: period and counter
            # from /serial/decode, with the token.
            ser = generate_in_page(drv, "serial", 3, name="PAY")
            eq(len(ser), 3, "3 serials: %r" % ser)
            want = d.get("/serial/decode/PAY/" + ser[1], headers=auth).json()
            eq(want["concealed"], True, "PAY is concealed")
            js(drv, "var o = document.getElementById('parse-out'); while (o.firstChild) o.removeChild(o.firstChild);")
            drv.find_elements("css selector", "#issue-list li button")[1].click()
            wait_text(drv, '#parse-server [data-k="counter"]', lambda t: t == str(want["counter"]),
                      "the serial's counter %d in the page" % want["counter"])
            eq(js(drv, "return document.getElementById('parse-kind').value"), "serial", "kind set by Parse")
            f = admin_parse_in_page(drv, "serial", "PAY", ser[1])
            eq((f["period"], f["counter"], f["concealed"]), (want["period"], str(want["counter"]), "true"),
               "period and counter shown")
            check(ser[1][-6:] != f["counter"].zfill(6), "the digits are not the counter")
            shot(drv, "tool-generate-desktop")
            shot(drv, "tool-generate-360", width=360)

            # A concealed tag: IDs generated, each one's Parse button asks
            # /segment/reveal; the counter shown is the route's, not the ID.
            sec = generate_in_page(drv, "segment", 5, name="sec", enc="dec")
            eq(len(set(sec)), 5, "5 distinct concealed IDs: %r" % sec)
            note = "Not in increasing order" in (text_of(drv, "#issue-out") or "")
            eq(note, [int(v) for v in sec] != sorted(int(v) for v in sec), "the order note: %r" % sec)
            counters = []
            for i, v in enumerate(sec):
                want = d.get("/segment/reveal/sec/" + v, headers=auth).json()
                eq(want["concealed"], True, "sec is concealed: %r" % want)
                js(drv, "var o = document.getElementById('parse-out'); while (o.firstChild) o.removeChild(o.firstChild);")
                drv.find_elements("css selector", "#issue-list li button")[i].click()
                got = wait_text(drv, '#parse-server [data-k="counter"]', lambda t: t.isdigit(),
                                "the counter of %s in the page" % v)
                eq(got, str(want["counter"]), "the counter of %s as /segment/reveal gives it" % v)
                eq((text_of(drv, '#parse-server [data-k="block"]'), text_of(drv, '#parse-server [data-k="key"]')),
                   (str(want["block"]), want["key"]), "block and key of %s" % v)
                counters.append(int(got))
            eq(sorted(counters), list(range(min(counters), min(counters) + 5)),
               "one batch: five consecutive counters: %r" % counters)
            check(any(int(v) != c for v, c in zip(sec, counters)), "the IDs are not the counters")
            shot(drv, "tool-reveal-desktop")
            # A plain tag through the same route: concealed false, counter = ID.
            f = admin_parse_in_page(drv, "reveal", "demo", str(nums[0]))
            eq((f.get("concealed"), f.get("counter")), ("false", str(nums[0])), "a plain tag's reveal")
            # The route's answer with a counter past 2^53 (stubbed in the
            # page's fetch: no tag gets there in a test): shown exactly; a
            # 404 with its message; the token in the header, never the URL.
            js(drv, """
                window.__reveal = [];
                var real = window.fetch;
                window.fetch = function (url, opt) {
                  if (String(url).indexOf('/segment/reveal/') !== 0) return real.apply(this, arguments);
                  window.__reveal.push({url: String(url), auth: opt && opt.headers && opt.headers.Authorization});
                  var miss = String(url).indexOf('/nosuch/') > 0;
                  var body = miss ? '{"error":"unknown_biz_tag","message":"biz_tag \\u0027nosuch\\u0027 is not in leaf_alloc"}'
                    : '{"biz_tag":"demo","id":"9007199254740993","concealed":true,"block":3,"offset":17,' +
                      '"counter":9007199254740993,"bits":20,"key":"k0123456789abcdef"}';
                  return Promise.resolve(new Response(body + '\\n', {status: miss ? 404 : 200,
                    headers: {'Content-Type': 'application/json'}}));
                };""")
            f = admin_parse_in_page(drv, "reveal", "demo", "9007199254740993")
            eq((f.get("counter"), f.get("block"), f.get("offset"), f.get("concealed"), f.get("key")),
               ("9007199254740993", "3", "17", "true", "k0123456789abcdef"), "the reveal answer shown: %r" % f)
            check("block 3, counter 9007199254740993" in f["title"], "reveal title: %r" % f["title"])
            f = admin_parse_in_page(drv, "reveal", "nosuch", "12")
            eq((f.get("status"), f.get("error")), ("404", "unknown_biz_tag"), "the route's 404 shown")
            check("is not in leaf_alloc" in f["text"], "its message: %r" % f["text"])
            calls = js(drv, "return window.__reveal;")
            eq([c["url"] for c in calls], ["/segment/reveal/demo/9007199254740993", "/segment/reveal/nosuch/12"],
               "the reveal requests")
            check(all(c["auth"] == "Bearer " + tok for c in calls), "the token in the header: %r" % calls)
            # A bad code: the route's 404 shown as such.
            f = admin_parse_in_page(drv, "serial", "NOPE", ser[0])
            eq((f.get("status"), f.get("error")), ("404", "unknown_serial_code"), "unknown code")
            check(js(drv, "return document.getElementById('auth').hidden"), "no token prompt for a 404")
            check(tok not in drv.current_url, "token not in the URL")
            errs = console_errors(drv, allow=("401", "404", "400"))
            check(not errs, "the browser console logged errors:\n%s" % "\n".join(errs))

            # No admin.token and no admin listener: the decode route is
            # refused, and the tool says why (a new port: a new origin, no
            # token in its sessionStorage). Snowflake off: the first node,
            # worker 0, still runs; it stops once the page has left it (its
            # refresh would fail in the log).
            d2 = wd.leafd(conf=dict(conf, **{"leaf.snowflake.enable": "false"}), name="leafd2").start()
            drv.get("http://127.0.0.1:%d/console#tool" % d2.port)
            d.stop()
            wait_for(lambda: js(drv, "return document.getElementById('issue-kind') !== null"), what="the page")
            ser2 = generate_in_page(drv, "serial", 1, name="PAY")
            f = admin_parse_in_page(drv, "serial", "PAY", ser2[0])
            eq((f.get("status"), f.get("error")), ("403", "admin_required"), "403 admin_required shown")
            check("neither admin.token nor an admin listener" in f["text"] and "counter" not in f["text"],
                  "the 403 explained, no counter: %r" % f["text"])
            check(js(drv, "return document.getElementById('auth').hidden"), "no token prompt: no token would help")
            f = admin_parse_in_page(drv, "reveal", "sec", sec[0])
            eq((f.get("status"), f.get("error")), ("403", "admin_required"), "reveal: 403 admin_required shown")
            check("neither admin.token nor an admin listener" in f["text"], "explained: %r" % f["text"])
            shot(drv, "tool-admin-required-desktop")
            errs = console_errors(drv, allow=("403",))
            check(not errs, "the browser console logged errors:\n%s" % "\n".join(errs))
        finally:
            quit_browser(drv)
