#!/usr/bin/env python3
"""check_docs.py: what drifts between the docs and the tree (for make lint).

Checks README.md, docs/*.md and fuzz/README.md against the files they
describe:

  fuzz     a stated number of fuzz targets ("20 fuzz targets", "16 targets"
           in fuzz/README.md or docs/development.md, "13 fuzzers") differs
           from the fuzz/fuzz_*.c files; a target missing from, or unknown
           to, fuzz/README.md's table
  links    a relative Markdown link (inline, image or reference) to a file
           that does not exist, or to a #heading the target has not
           (GitHub's anchors); links inside code are not links
  keys     a config key named in backticks (`segment.wait_ms`, `http.h2 =
           false`) that src/core/config.c's key table does not have (a
           serial definition's `serial.<code>.<field>` is checked against
           src/ids/serial_internal.h's field names); a key of
           conf/leafd.conf that the table does not have; a default in a
           docs "| key | default |" table, or written "`key`, default N"
           or "`key` (default N)", that is not the table's
  errors   an error code the server answers with (a literal code in an
           api_reply_error, http_out_error or http_h2_refuse call under
           src/) that no doc names in backticks

Each finding names the file and line and what is wrong.

    python3 tools/check_docs.py [ROOT]       exit 0 clean, 1 with findings
    python3 tools/check_docs.py --self-test  plants errors in a temporary
                                             copy of the tree and checks
                                             that each one is found
"""
import glob
import os
import re
import shutil
import sys
import tempfile

NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve "
    "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty "
    "twenty-one twenty-two twenty-three twenty-four twenty-five twenty-six "
    "twenty-seven twenty-eight twenty-nine thirty".split())}
NUM = r"(\d+|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")"
# "20 fuzz targets", "16 libFuzzer targets", "13 fuzzers" anywhere
FUZZ_COUNT = re.compile(r"\b" + NUM + r"\s+(?:(?:fuzz|libFuzzer|fuzzing)\s+targets|fuzzers)\b",
                        re.I)
# a bare "20 targets" where only fuzz targets are meant
BARE_COUNT = re.compile(r"\b" + NUM + r"\s+targets\b", re.I)
BARE_COUNT_FILES = ("fuzz/README.md", "docs/development.md")
FUZZ_ROW = re.compile(r"^\|\s*`fuzz_(\w+)\.c`")

INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
FENCE = re.compile(r"^\s{0,3}(```+|~~~+)")

KEY_TOKEN = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_<>*]+)+")
# backticked things that look like keys and are not, each with its reason
NOT_KEYS = {
    "leaf.properties",              # Leaf's configuration file's name
    "grpc.ssl_channel_credentials",  # grpcio's Python API
}
# "`key`, default 1,000,000" or "`key` (default 500)"; not "(default 3000 +
# 1000 + ...)", a sum over several keys
DEFAULT_PROSE = re.compile(r"`([a-z][a-z0-9_.]+)`(?:,| \(|:)\s*default\s+`?"
                           r"(\d{1,3}(?:,\d{3})+|[^\s`),;]+)(?![^\s`),;])`?(?!\s*[+*/-])")


def md_files(root):
    files = ["README.md"] + sorted(os.path.relpath(p, root) for p in
                                   glob.glob(os.path.join(root, "docs", "*.md")))
    if os.path.exists(os.path.join(root, "fuzz", "README.md")):
        files.append("fuzz/README.md")
    return [f for f in files if os.path.exists(os.path.join(root, f))]


def read_lines(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read().split("\n")


def prose_lines(lines):
    """(line number, text) of the lines outside fenced code, with inline
    code spans blanked (their length kept)."""
    fence = None
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, line


def strip_code(line):
    return re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def code_spans(line):
    return [m.group(2).strip() for m in re.finditer(r"(`+)(.+?)\1", line)]


def number(s):
    s = s.lower()
    return int(s) if s.isdigit() else NUMBER_WORDS[s]


# ---- fuzz targets -------------------------------------------------------

def check_fuzz(root, problems):
    targets = sorted(os.path.basename(p)[5:-2] for p in
                     glob.glob(os.path.join(root, "fuzz", "fuzz_*.c")))
    for rel in md_files(root):
        for n, line in prose_lines(read_lines(root, rel)):
            text = strip_code(line)
            found = [m for m in FUZZ_COUNT.finditer(text)]
            if rel in BARE_COUNT_FILES:
                found += [m for m in BARE_COUNT.finditer(text)
                          if not any(f.start() <= m.start() < f.end() for f in found)]
            for m in found:
                if number(m.group(1)) != len(targets):
                    problems.append("%s:%d: says \"%s\", but fuzz/ has %d targets "
                                    "(fuzz/fuzz_*.c)" % (rel, n, m.group(0), len(targets)))
    readme = os.path.join(root, "fuzz", "README.md")
    if not os.path.exists(readme):
        problems.append("fuzz/README.md: missing (it lists the fuzz targets)")
        return
    listed = {}
    for n, line in enumerate(read_lines(root, "fuzz/README.md"), 1):
        m = FUZZ_ROW.match(line)
        if m:
            listed.setdefault(m.group(1), n)
    for t in targets:
        if t not in listed:
            problems.append("fuzz/README.md: fuzz/fuzz_%s.c is not in the table of "
                            "targets" % t)
    for t, n in sorted(listed.items()):
        if t not in targets:
            problems.append("fuzz/README.md:%d: lists fuzz_%s.c, which is not in fuzz/"
                            % (n, t))


# ---- links --------------------------------------------------------------

def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)     # links: their text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchor_cache = {}


def anchors(path):
    if path in _anchor_cache:
        return _anchor_cache[path]
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    seen, out = {}, set()
    for _, line in prose_lines(lines):
        m = re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else "%s-%d" % (s, k))
        out.update(HTML_ANCHOR.findall(line))
    _anchor_cache[path] = out
    return out


def check_links(root, problems):
    for rel in md_files(root):
        here = os.path.dirname(os.path.join(root, rel))
        for n, line in prose_lines(read_lines(root, rel)):
            text = strip_code(line)
            targets = [m.group(1) for m in INLINE_LINK.finditer(text)]
            m = REF_DEF.match(text)
            if m:
                targets.append(m.group(1))
            for t in targets:
                if SCHEME.match(t) or t.startswith("//"):
                    continue
                path, _, frag = t.partition("#")
                full = os.path.normpath(os.path.join(here, path)) if path else \
                    os.path.join(root, rel)
                if not os.path.exists(full):
                    problems.append("%s:%d: link to %s: no such file (%s)"
                                    % (rel, n, t, os.path.relpath(full, root)))
                    continue
                if frag and full.endswith(".md") and os.path.isfile(full) and \
                        frag not in anchors(full):
                    problems.append("%s:%d: link to %s: %s has no heading with anchor #%s"
                                    % (rel, n, t, os.path.relpath(full, root), frag))


# ---- config keys --------------------------------------------------------

def key_table(root):
    """{key: default or None} from config.c's key table."""
    path = os.path.join(root, "src", "core", "config.c")
    with open(path, encoding="utf-8") as f:
        src = f.read()
    start = src.find("static const struct key keys[] = {")
    if start < 0:
        raise SystemExit("check_docs: src/core/config.c: no key table "
                         "(static const struct key keys[]); update tools/check_docs.py")
    body = src[start:src.index("\n};", start)]
    names = re.findall(r"\{\s*\"([^\"]+)\",\s*K_", body)
    table = {}
    for m in re.finditer(r"\{\s*\"([^\"]+)\",\s*K_\w+,\s*[^,]+,\s*[^,]+,\s*[^,]+,\s*"
                         r"(NULL|\"(?:[^\"\\]|\\.)*\")", body):
        table[m.group(1)] = None if m.group(2) == "NULL" else m.group(2)[1:-1]
    if not names or set(names) != set(table):
        raise SystemExit("check_docs: src/core/config.c: cannot read the key table's "
                         "defaults (%s); update tools/check_docs.py"
                         % ", ".join(sorted(set(names) - set(table))[:5]))
    return table


def serial_fields(root):
    path = os.path.join(root, "src", "ids", "serial_internal.h")
    with open(path, encoding="utf-8") as f:
        m = re.search(r"field_names\[[^\]]*\]\s*=\s*\{([^}]*)\}", f.read())
    if not m:
        raise SystemExit("check_docs: src/ids/serial_internal.h: no field_names[]; "
                         "update tools/check_docs.py")
    return set(re.findall(r"\"([^\"]+)\"", m.group(1)))


def known_key(k, table, fields):
    """True when k names a key (or, with * or <..>, a family that has one)."""
    if k in table or k in NOT_KEYS:
        return True
    parts = k.split(".")
    if parts[:2] == ["segment", "prefix"] and len(parts) == 3:
        return True           # segment.prefix.<prefix> = <biz_tag> (config.c reads them)
    if parts[0] == "serial" and len(parts) == 3:
        return parts[2] in fields or parts[2].startswith("<")
    if parts[0] == "serial" and len(parts) > 3:
        return True           # a serial row's name (serial.pay.y4mod.0.6), not a key
    if "*" in k or "<" in k:
        pat = ""
        for piece in re.split(r"(\*|<[^>]*>)", k):
            if piece == "*":
                pat += "[a-z0-9_.]*"
            elif piece.startswith("<"):
                pat += "[a-z0-9_]+"
            else:
                pat += re.escape(piece)
        return any(re.fullmatch(pat, t) for t in table)
    return False


def same_default(cell, dflt):
    cell = cell.replace("`", "").strip()
    cell = re.sub(r"\s*\(.*\)$", "", cell)          # "0 (off)"
    if cell in ('""', "''"):
        cell = ""
    if dflt in (None, ""):
        # no literal default in the table: an empty cell, or prose
        # ("OpenSSL's default", "none") says so
        return cell == "" or not re.fullmatch(r"[\w./:-]+", cell) or cell in ("none", "off", "0")
    return cell == dflt


def check_keys(root, problems):
    table = key_table(root)
    fields = serial_fields(root)
    prefixes = {k.split(".")[0] for k in table if "." in k}
    for rel in md_files(root):
        if rel == "fuzz/README.md":
            continue
        lines = read_lines(root, rel)
        in_table = False
        for n, line in prose_lines(lines):
            for span in code_spans(line):
                t = re.split(r"\s*=|\s", span.strip(), maxsplit=1)[0].lstrip("-")
                if not KEY_TOKEN.fullmatch(t) or t.split(".")[0] not in prefixes:
                    continue
                if not known_key(t, table, fields):
                    problems.append("%s:%d: `%s` is not a key of src/core/config.c's "
                                    "key table" % (rel, n, t))
            # "| key | default | ..." tables
            if re.match(r"^\|\s*key\s*\|\s*default\s*\|", line):
                in_table = True
                continue
            if not line.startswith("|"):
                in_table = False
            elif in_table and not re.match(r"^\|\s*:?-", line):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                keys = [c.strip() for c in cells[0].replace("`", "").split(",")]
                if len(keys) == 1 and keys[0] in table and len(cells) > 1 and \
                        not same_default(cells[1], table[keys[0]]):
                    problems.append("%s:%d: `%s` default \"%s\", but src/core/config.c "
                                    "says \"%s\"" % (rel, n, keys[0], cells[1],
                                                     table[keys[0]] or ""))
            for m in DEFAULT_PROSE.finditer(line):
                k, v = m.group(1), m.group(2).replace(",", "").rstrip(".")
                if k in table and table[k] not in (None, "") and v != table[k]:
                    problems.append("%s:%d: `%s`, default %s, but src/core/config.c "
                                    "says %s" % (rel, n, k, m.group(2), table[k]))
    conf = os.path.join(root, "conf", "leafd.conf")
    if os.path.exists(conf):
        for n, line in enumerate(read_lines(root, "conf/leafd.conf"), 1):
            m = re.match(r"^#?([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)\s*=", line)
            if m and not known_key(m.group(1), table, fields):
                problems.append("conf/leafd.conf:%d: `%s` is not a key of "
                                "src/core/config.c's key table" % (n, m.group(1)))


# ---- error codes --------------------------------------------------------

ERROR_CALL = re.compile(r"\b(?:api_reply_error|http_out_error|http_h2_refuse)\s*\(([^;]*)")
ERROR_CODE = re.compile(r"\b[1-5]\d\d,\s*(?:[A-Z_]+,\s*)?\"([a-z][a-z0-9_]*)\"")


def check_errors(root, problems):
    """Every error code the server answers with a literal (api_reply_error,
    http_out_error, http_h2_refuse) is named, in backticks, in the docs."""
    where = {}
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.c"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            src = f.read()
        for call in ERROR_CALL.finditer(src):
            m = ERROR_CODE.search(call.group(1))
            if m:
                line = src.count("\n", 0, call.start()) + 1
                where.setdefault(m.group(1), "%s:%d" % (os.path.relpath(path, root), line))
    named = set()
    for rel in md_files(root):
        for _, line in prose_lines(read_lines(root, rel)):
            named.update(code_spans(line))
    for code, at in sorted(where.items()):
        if code not in named:
            problems.append("docs/http-api.md: error code `%s` (%s) is in no doc"
                            % (code, at))


def check(root):
    _anchor_cache.clear()
    problems = []
    check_fuzz(root, problems)
    check_links(root, problems)
    check_keys(root, problems)
    check_errors(root, problems)
    return problems


# ---- self-test ----------------------------------------------------------

def copy_tree(root, dst):
    top_skip = {".git", "build", "leafd", "leafd-asan"}

    def ignore(d, names):
        skip = [x for x in names if x.endswith((".o", ".d"))]
        if os.path.abspath(d) == os.path.abspath(root):
            skip += [x for x in names if x in top_skip]
        if os.path.abspath(d) == os.path.abspath(os.path.join(root, "fuzz")):
            skip += [x for x in names if x in ("corpus", "regressions")]   # seeds: many, unread
        return skip
    shutil.copytree(root, dst, ignore=ignore, symlinks=True)


def edit(path, old, new):
    with open(path, encoding="utf-8") as f:
        s = f.read()
    if old not in s:
        raise AssertionError("self-test: %s does not contain %r" % (path, old))
    with open(path, "w", encoding="utf-8") as f:
        f.write(s.replace(old, new, 1))


def append(path, text):
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def self_test(root):
    failures = []
    tmp = tempfile.mkdtemp(prefix="check_docs.")
    try:
        return run_self_test(root, tmp, failures)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_self_test(root, tmp, failures):
    t = os.path.join(tmp, "tree")
    copy_tree(root, t)           # once; each plant is undone after its check

    def expect(name, touched, plant, *wanted):
        had = len(failures)
        saved = {}
        for rel in touched:
            path = os.path.join(t, rel)
            saved[path] = open(path, "rb").read() if os.path.exists(path) else None
        try:
            before = set(check(t))
            plant(t)
            new = [p for p in check(t) if p not in before]
        finally:
            for path, data in saved.items():
                if data is None:
                    if os.path.exists(path):
                        os.remove(path)
                else:
                    with open(path, "wb") as f:
                        f.write(data)
        for w in wanted:
            if not any(re.search(w, p) for p in new):
                failures.append("%s: no finding matching %r (new findings: %s)"
                                % (name, w, new or "none"))
        print("self-test %-17s %s" % (name, "ok" if len(failures) == had else "FAILED"))

    n = len(glob.glob(os.path.join(root, "fuzz", "fuzz_*.c")))
    expect("wrong count", ["README.md"],
           lambda t: append(os.path.join(t, "README.md"),
                            "\nThe tree has %d fuzz targets.\n" % (n + 3)),
           r"^README\.md:\d+: says \"%d fuzz targets\", but fuzz/ has %d" % (n + 3, n))
    expect("wrong word count", ["fuzz/README.md"],
           lambda t: append(os.path.join(t, "fuzz", "README.md"),
                            "\nsixteen targets\n" if n != 16 else "\nseven targets\n"),
           r"^fuzz/README\.md:\d+: says")
    expect("unlisted target", ["fuzz/fuzz_zz_planted.c"],
           lambda t: open(os.path.join(t, "fuzz", "fuzz_zz_planted.c"), "w").close(),
           r"fuzz_zz_planted\.c is not in the table", r"but fuzz/ has %d" % (n + 1))
    expect("broken link", ["docs/design.md"],
           lambda t: append(os.path.join(t, "docs", "design.md"),
                            "\nSee [the missing page](no-such-page.md) and "
                            "![a picture](../web/none.png).\n"),
           r"^docs/design\.md:\d+: link to no-such-page\.md: no such file",
           r"^docs/design\.md:\d+: link to \.\./web/none\.png")
    expect("broken anchor", ["README.md"],
           lambda t: append(os.path.join(t, "README.md"),
                            "\n[x](docs/design.md#no-such-heading)\n"),
           r"^README\.md:\d+: link to docs/design\.md#no-such-heading: .*no heading")
    expect("unknown key", ["docs/operations.md"],
           lambda t: append(os.path.join(t, "docs", "operations.md"),
                            "\nSet `segment.no_such_key = 3`.\n"),
           r"^docs/operations\.md:\d+: `segment\.no_such_key` is not a key")
    expect("wrong default", ["docs/operations.md"],
           lambda t: append(os.path.join(t, "docs", "operations.md"),
                            "\n(`segment.wait_ms`, default 12345)\n"),
           r"^docs/operations\.md:\d+: `segment\.wait_ms`, default 12345")
    expect("undocumented code", ["src/api/api.c"],
           lambda t: append(os.path.join(t, "src", "api", "api.c"),
                            '\nstatic void planted(struct http_conn *c)\n'
                            '{ api_reply_error(c, R_OTHER, 503, "planted_code", NULL, "x"); }\n'),
           r"error code `planted_code` \(src/api/api\.c:\d+\) is in no doc")

    # and nothing is found in code, or in links and keys that are right
    before = set(check(t))
    append(os.path.join(t, "README.md"),
           "\n```\n[not a link](nowhere.md) 99 fuzz targets `segment.nope`\n```\n"
           "Inline `[not a link](nowhere.md)` is code.\n"
           "[a good one](docs/design.md#segment-mode) and [another](#quick-start)\n")
    new = [p for p in check(t) if p not in before]
    if new:
        failures.append("clean additions: unexpected findings %s" % new)
    print("self-test %-17s %s" % ("no false alarms", "FAILED" if new else "ok"))

    if failures:
        for f in failures:
            print("check_docs self-test: " + f, file=sys.stderr)
        return 1
    print("check_docs self-test: ok")
    return 0


def main(argv):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = [a for a in argv[1:] if a != "--self-test"]
    root = os.path.abspath(args[0]) if args else here
    if "--self-test" in argv[1:]:
        return self_test(root)
    problems = check(root)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print("check_docs: %d finding(s)" % len(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
