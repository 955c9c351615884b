#!/usr/bin/env python3
"""check_layers.py: hold src/'s layers (make lint runs it).

src/ has one folder per layer. USES below is docs/design.md's "uses" table
("The layers of src/"): the folders each folder may use besides itself.
It is a set of allowed edges, not an order: http/ and db/ both sit on core/
alone, and store/ may not use http/ although http/ is listed lower.
main.c, in src/ itself, uses everything. One edge is narrower than a
folder: ids/ uses snowflake's codec only, written "snowflake/sfcodec" (the
header sfcodec.h and the object sfcodec.o), not the generator.

Two checks, both on what the compiler sees rather than on the text:

  includes  the preprocessor lists every header each file of src/ (.c and
            .h) pulls in, directly or through other headers (cc -MM with
            the build's CFLAGS), so angle brackets, comments before the
            directive and macro includes resolve as they do in the build.
            A header of a folder the file may not use is refused, once, where
            it is first let in: a header's bad include is reported at the
            header, not at every file that includes it. protoc-c's C for
            proto/ (build/gen/) belongs to api/.
  symbols   nm lists each object's undefined symbols (build/<name>.o, built
            flat from src/<folder>/<name>.c); one defined only by objects of
            folders the file may not use is refused, so an `extern`
            prototype cannot stand in for a forbidden include.

Also refused: a source file in no declared folder, two files of one name in
two folders (headers are included by bare name, objects built flat), and an
object missing or older than its source (make lint builds them first).

    python3 tools/check_layers.py --cflags "$(CFLAGS)" [--cc CC] [ROOT]
    python3 tools/check_layers.py --self-test --cflags "$(CFLAGS)" [--cc CC] [ROOT]
exit 0 clean, 1 with findings. make lint passes the build's CC and CFLAGS and
--self-test, which, once the tree is clean, plants each kind of violation in
a copy of it and fails unless every one is refused (PLANTS below).
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

LAYERS = ["core", "db", "http", "snowflake", "store", "segment", "ids", "api"]
USES = {
    "core": [],
    "db": ["core"],
    "http": ["core"],
    "snowflake": ["core", "db"],
    "store": ["core", "db"],
    "segment": ["store", "db", "core"],
    "ids": ["snowflake/sfcodec", "store", "db", "core"],
    "api": ["ids", "segment", "store", "snowflake", "http", "db", "core"],
    "main.c": list(LAYERS),
}
GEN = "build/gen"            # protoc-c's C: api/'s
GEN_OWNER = "api"
TABLE = 'docs/design.md, "The layers of src/"'


def rule(me):
    """The sentence a finding ends with: what `me` may use."""
    who = "main.c" if me == "main.c" else me + "/"
    if not USES[me]:
        return "%s uses no other folder (%s)" % (who, TABLE)
    names = [u + ("" if "/" in u else "/") for u in USES[me]]
    return "%s may use only %s (%s)" % (who, ", ".join(names), TABLE)


def may_use(me, unit, stem):
    """Whether a file of folder `me` may use one of `unit` named `stem`."""
    if me == "main.c" or unit == me:
        return True
    return unit in USES[me] or "%s/%s" % (unit, stem) in USES[me]


def unit_of(rel):
    """The folder a root-relative path belongs to, or None if outside src/
    and build/gen/ (libc, libevent, MariaDB's headers)."""
    if rel.startswith(GEN + "/"):
        return GEN_OWNER
    parts = rel.split("/")
    if parts[0] != "src":
        return None
    if len(parts) == 2:
        return "main.c" if parts[1] == "main.c" else ""
    return parts[1] if parts[1] in USES and len(parts) == 3 else ""


def stem(path):
    return os.path.basename(path).split(".")[0]


def sources(root):
    """src/'s files by folder; findings for stray files and shared names."""
    src = os.path.join(root, "src")
    files, problems, home = {}, [], {}
    for dirpath, dirs, names in os.walk(src):
        dirs.sort()
        for f in sorted(names):
            if not f.endswith((".c", ".h")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)
            u = unit_of(rel)
            if not u:
                problems.append("%s: not in a declared layer folder (%s)"
                                % (rel, ", ".join(LAYERS)))
                continue
            if f in home:
                problems.append("%s: the same name as %s (headers are included by "
                                "name and objects are built flat)" % (rel, home[f]))
            else:
                home[f] = rel
            files[rel] = u
    return files, problems


def parse_deps(text):
    """cc -MM's rules, in input order: [[input, dep, dep, ...], ...]."""
    rules = []
    for rule_text in text.replace("\\\n", " ").splitlines():
        if ":" not in rule_text or not rule_text.strip():
            continue
        deps = rule_text.split(":", 1)[1].split()
        if deps:
            rules.append(deps)
    return rules


def include_line(root, path, header):
    """The line that names `header` in an include, if one does (0 when the
    header comes through another header or a macro)."""
    name = os.path.basename(header)
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if "include" in line and name in line:
                return n
    return 0


# cc -MM's answers for one run, by (flags, every src/ header's size and
# time) and then by file (size, time; paths relative to the root): the
# self-test checks a copy of the tree (times kept) once per plant, and the
# preprocessor runs only on what the plant added or changed.
_DEPS = {}


def sig(root, path):
    st = os.stat(os.path.join(root, path))
    return (st.st_size, st.st_mtime_ns)


def preprocess(root, files, cc, cflags):
    """{path: [header, ...]} for every file, and the preprocessor's errors."""
    key = (cc, tuple(cflags),
           tuple((p, sig(root, p)) for p in sorted(files) if p.endswith(".h")))
    memo = _DEPS.setdefault(key, {})
    todo = [p for p in sorted(files) if memo.get(p, (None,))[0] != sig(root, p)]
    err, fresh = "", {}
    if todo:
        p = subprocess.run([cc] + cflags + ["-MM"] + todo, cwd=root,
                           capture_output=True, text=True)
        if p.returncode != 0:
            err = p.stderr.strip()[:2000]       # then nothing is kept
        for deps in parse_deps(p.stdout):
            fresh[os.path.relpath(os.path.join(root, deps[0]), root)] = deps[1:]
    for path in todo:
        memo.pop(path, None)
        if not err and path in fresh:
            memo[path] = (sig(root, path), fresh[path])
    return {p: fresh.get(p, memo.get(p, (None, []))[1]) for p in files}, err


def check_includes(root, files, cc, cflags):
    found, err = preprocess(root, files, cc, cflags)
    problems = []
    if err:
        problems.append("the preprocessor failed (%s -MM): %s" % (cc, err))
    deps = {p: set(os.path.relpath(os.path.join(root, d), root) for d in ds)
            for p, ds in found.items()}
    bad = {p: set(d for d in ds if unit_of(d) is not None
                  and not may_use(files[p], unit_of(d), stem(d)))
           for p, ds in deps.items()}

    def first_step(path, d):
        """Whether path's include of d is its own fault, not that of a header
        it may use that is refused d itself, or of a refused header that
        brings d along (a header that includes path back does not count)."""
        return not any(d in deps.get(g, ()) and path not in deps.get(g, ())
                       and (d in bad.get(g, ()) or g in bad[path])
                       for g in deps[path] if g != d)
    shown = [(p, d) for p in sorted(bad) for d in sorted(bad[p]) if first_step(p, d)]
    if not shown:                       # never hide every finding
        shown = [(p, d) for p in sorted(bad) for d in sorted(bad[p])]
    for path, rel in shown:
        me, u = files[path], unit_of(rel)
        n = include_line(root, path, rel)
        where = "%s:%d" % (path, n) if n else path
        how = "includes" if n else "pulls in (through a header or a macro)"
        if not u:
            problems.append("%s: %s %s, which is in no declared layer folder"
                            % (where, how, rel))
        elif rel.startswith(GEN + "/"):
            problems.append("%s: %s %s, protoc-c's C for proto/, which only api/ "
                            "(and main.c) may include: %s" % (where, how, rel, rule(me)))
        else:
            problems.append("%s: %s %s, which is in %s/: %s"
                            % (where, how, rel, u, rule(me)))
    return problems


def objects(root, files, objdir):
    """{object path: (source path, folder)} for src/'s .c files, protoc-c's
    and the console's objects; findings for missing or stale ones."""
    objs, problems = {}, []
    for path, u in sorted(files.items()):
        if not path.endswith(".c"):
            continue
        o = os.path.join(objdir, stem(path) + ".o")
        if not os.path.exists(o):
            problems.append("%s: no object %s (make lint builds the objects first)"
                            % (path, os.path.relpath(o, root)))
        elif os.path.getmtime(o) < os.path.getmtime(os.path.join(root, path)):
            problems.append("%s: its object %s is older than it (make lint builds "
                            "the objects first)" % (path, os.path.relpath(o, root)))
        else:
            objs[o] = (path, u)
    gen = os.path.join(root, GEN)
    for dirpath, _, names in os.walk(gen):
        for f in names:
            if f.endswith(".pb-c.c"):
                o = os.path.join(objdir, f[:-2] + ".o")
                if os.path.exists(o):
                    objs[o] = (os.path.relpath(os.path.join(dirpath, f), root), GEN_OWNER)
    o = os.path.join(objdir, "console_assets.o")
    if os.path.exists(o):
        objs[o] = ("build/console_assets.c", "api")
    return objs, problems


def check_symbols(root, files, objdir):
    objs, problems = objects(root, files, objdir)
    if not objs:
        return problems
    p = subprocess.run(["nm", "-P", "-g", "-A"] + sorted(objs),
                       capture_output=True, text=True)
    if p.returncode != 0:
        return problems + ["nm failed: %s" % p.stderr.strip()[:2000]]
    defined, undefined = {}, []
    for line in p.stdout.splitlines():
        head, _, rest = line.partition(": ")
        fields = rest.split()
        if head not in objs or len(fields) < 2:
            continue
        sym, kind = fields[0], fields[1]
        if kind == "U":
            undefined.append((head, sym))
        elif kind not in "wv":
            defined.setdefault(sym, []).append(head)
    seen = set()
    for o, sym in undefined:
        path, me = objs[o]
        owners = defined.get(sym)
        if not owners or (path, sym) in seen:
            continue            # libc, libevent, ...: not src/'s
        seen.add((path, sym))
        if any(may_use(me, objs[d][1], stem(objs[d][0])) for d in owners):
            continue
        src, u = objs[owners[0]]
        problems.append("%s: uses %s, defined in %s (%s/), in its object (an extern "
                        "declaration needs no include): %s" % (path, sym, src, u, rule(me)))
    return problems


def check(root, cc, cflags, objdir=None):
    files, problems = sources(root)
    problems += check_includes(root, files, cc, cflags)
    problems += check_symbols(root, files, objdir or os.path.join(root, "build"))
    return files, problems


PLANTED = "src/store/store_planted.c"
TAIL = "int store_planted(void);\nint store_planted(void) { return 0; }\n"
# (what, {path: text}, the file the finding must name, text it must hold)
PLANTS = [
    ("an include in angle brackets",
     {PLANTED: "#include <segment.h>\n" + TAIL}, PLANTED,
     ":1: includes src/segment/segment.h, which is in segment/: " + rule("store")),
    ("a comment before the directive",
     {PLANTED: '/* x */ #include "segment.h"\n' + TAIL}, PLANTED,
     ":1: includes src/segment/segment.h, which is in segment/: " + rule("store")),
    ("a macro include",
     {PLANTED: '#define H "segment.h"\n#include H\n' + TAIL}, PLANTED,
     ": pulls in (through a header or a macro) src/segment/segment.h, which is in "
     "segment/: " + rule("store")),
    ("a sideways include (store/ to http/, listed lower)",
     {PLANTED: '#include "http.h"\n' + TAIL}, PLANTED,
     ":1: includes src/http/http.h, which is in http/: " + rule("store")),
    ("an extern prototype of a higher layer's function, no include",
     {PLANTED: "struct segments;\nstruct segment_tag;\n"
      "extern void segment_tag_gone(struct segments *s, struct segment_tag *t);\n"
      "void store_planted(struct segments *s, struct segment_tag *t);\n"
      "void store_planted(struct segments *s, struct segment_tag *t)\n"
      "{\n    segment_tag_gone(s, t);\n}\n"}, PLANTED,
     ": uses segment_tag_gone, defined in src/segment/segment.c (segment/), in its "
     "object (an extern declaration needs no include): " + rule("store")),
    ("a header's include, reported at the header, not at its includers",
     {"src/store/store_planted.h": '#include "http.h"\n',
      PLANTED: '#include "store_planted.h"\n' + TAIL}, "src/store/store_planted.h",
     ":1: includes src/http/http.h, which is in http/: " + rule("store")),
    ("ids/ using snowflake/ beyond its codec",
     {"src/ids/ids_planted.c": '#include "snowflake.h"\n'
      "int ids_planted(void);\nint ids_planted(void) { return 0; }\n"},
     "src/ids/ids_planted.c",
     ":1: includes src/snowflake/snowflake.h, which is in snowflake/: " + rule("ids")),
    ("protoc-c's header below api/",
     {"src/http/http_planted.c": '#include "leafd/v1/leafd.pb-c.h"\n'
      "int http_planted(void);\nint http_planted(void) { return 0; }\n"},
     "src/http/http_planted.c", ":1: includes build/gen/leafd/v1/leafd.pb-c.h, "
     "protoc-c's C for proto/, which only api/ (and main.c) may include"),
    ("a file in no declared folder",
     {"src/extra/x.c": "int x(void);\n"}, "src/extra/x.c",
     ": not in a declared layer folder"),
    ("one name in two folders",
     {"src/api/util.h": ""}, "src/core/util.h", ": the same name as src/api/util.h"),
]


def expect(ok, what):
    if not ok:
        sys.exit("check_layers: self-test FAILED: " + what)


def self_test(root, cc, cflags):
    """A copy of the real tree (sources copied, objects linked) passes; each
    plant in PLANTS, alone in that copy, gives findings that all name its
    file, one of them with its rule. Planted .c files are compiled with the
    build's flags, so the symbol check reads a real object."""
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(os.path.join(root, "src"), os.path.join(d, "src"))
        os.makedirs(os.path.join(d, "build"))
        os.symlink(os.path.abspath(os.path.join(root, GEN)), os.path.join(d, GEN))
        for f in os.listdir(os.path.join(root, "build")):
            if f.endswith(".o"):
                os.symlink(os.path.abspath(os.path.join(root, "build", f)),
                           os.path.join(d, "build", f))
        _, clean = check(d, cc, cflags)
        expect(clean == [], "the copy of the tree is not clean:\n" + "\n".join(clean))
        for what, plant, path, want in PLANTS:
            made = []
            for p, text in plant.items():
                os.makedirs(os.path.dirname(os.path.join(d, p)), exist_ok=True)
                with open(os.path.join(d, p), "w") as fh:
                    fh.write(text)
                made.append(os.path.join(d, p))
                if p.endswith(".c") and unit_of(p):
                    o = os.path.join(d, "build", stem(p) + ".o")
                    subprocess.run([cc] + cflags + ["-c", "-o", o, p], cwd=d, check=True)
                    made.append(o)
            _, found = check(d, cc, cflags)
            for m in made:
                os.remove(m)
            expect(found, "%s: not refused" % what)
            stray = [f for f in found if not f.startswith(path)]
            expect(not stray, "%s: findings about other files: %s" % (what, stray))
            expect(any(f.startswith(path) and want in f for f in found),
                   "%s: no finding '%s%s' in %s" % (what, path, want, found))
        _, clean = check(d, cc, cflags)
        expect(clean == [], "not clean once the plants are gone: %s" % clean)
    print("check_layers: self-test passed (%d plants refused, the tree's copy clean)"
          % len(PLANTS))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=".")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--cflags", required=True,
                    help="the build's CFLAGS (make lint passes them)")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    cflags = shlex.split(a.cflags)
    files, problems = check(a.root, a.cc, cflags)
    for p in problems:
        print(p)
    if problems:
        print("check_layers: %d finding(s)%s" % (len(problems), " (no self-test: it "
              "needs a clean tree)" if a.self_test else ""))
        return 1
    print("check_layers: %d files in %d folders and main.c: every include and "
          "every symbol from a folder the uses table allows" % (len(files), len(LAYERS)))
    if a.self_test:
        self_test(a.root, a.cc, cflags)
    return 0


if __name__ == "__main__":
    sys.exit(main())
