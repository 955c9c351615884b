#!/usr/bin/env python3
"""check_layers.py: hold src/'s layers (make lint runs it).

src/ has one folder per layer, declared here lowest first (docs/design.md
states the same order and what each layer holds). A file may include
headers of its own folder and of the folders declared below it, never of
one above: an upward #include fails, naming the file, the line and the rule.
main.c, in src/ itself, stands above every folder. The C that protoc-c
generates from proto/ (build/gen/, included as "leafd/v1/leafd.pb-c.h")
belongs to api/, which serves the schema: a lower layer may not include
it. Also refused: a source
file in no declared folder, and two files of one name in two folders
(headers are included by bare name, objects built flat).

    python3 tools/check_layers.py [ROOT]     exit 0 clean, 1 with findings
    python3 tools/check_layers.py --self-test   the rule on a made-up tree
"""
import os
import re
import sys
import tempfile

LAYERS = ["core", "db", "http", "snowflake", "store", "segment", "ids", "api"]
TOP = len(LAYERS)                       # src/main.c
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GENERATED = (".pb-c.h", LAYERS.index("api"))   # protoc-c's headers: api/ up


def check(root):
    src = os.path.join(root, "src")
    rank, home, problems = {}, {}, []
    dup = set()
    for dirpath, dirs, files in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(dirpath, src)
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join("src", rel, f) if rel != "." else os.path.join("src", f)
            if rel == ".":
                r = TOP if f == "main.c" else None
            else:
                r = LAYERS.index(rel) if rel in LAYERS else None
            if r is None:
                problems.append("%s: not in a declared layer folder (%s)"
                                % (path, ", ".join(LAYERS)))
                continue
            if f in home:
                problems.append("%s: the same name as %s (headers are included by "
                                "name and objects are built flat)" % (path, home[f]))
                dup.add(f)
            else:
                home[f] = path
            rank[path] = r
    for path in sorted(rank):
        me = rank[path]
        with open(os.path.join(root, path), encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                name = os.path.basename(m.group(1))
                if name.endswith(GENERATED[0]) and me < GENERATED[1]:
                    problems.append(
                        "%s:%d: includes %s, protoc-c's C for proto/, which only "
                        "api/ (and main.c) may include" % (path, n, m.group(1)))
                    continue
                target = home.get(name)
                if target is None or name in dup:
                    continue        # not one of src/'s headers, or ambiguous
                if rank[target] > me:
                    mine = "main.c" if me == TOP else LAYERS[me] + "/"
                    problems.append(
                        "%s:%d: includes %s, which is in %s/, above %s: a layer "
                        "includes only from itself and the layers below it (%s, "
                        "lowest first)" % (path, n, m.group(1), LAYERS[rank[target]],
                                           mine, " < ".join(LAYERS)))
    return rank, problems


def self_test():
    """The rule itself: a tree with one upward include, one stray file and
    one name in two folders gives exactly those three findings; the same
    tree without them gives none."""
    with tempfile.TemporaryDirectory() as d:
        def put(path, text):
            os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
            with open(os.path.join(d, path), "w") as fh:
                fh.write(text)
        put("src/core/util.h", "")
        put("src/core/util.c", '#include "util.h"\n')
        put("src/segment/segment.h", '#include "util.h"\n')
        put("src/api/api.c", '#include "segment.h"\n#include <stdio.h>\n'
            '#include "leafd/v1/leafd.pb-c.h"\n')
        put("src/main.c", '#include "api.h"\n#include "segment.h"\n')
        _, clean = check(d)
        assert clean == [], clean
        put("src/core/log.c", '#include "util.h"\n\n  # include "segment.h"\n')
        put("src/extra/x.c", "")
        put("src/api/util.h", "")
        put("src/http/h.c", '#include "leafd/v1/leafd.pb-c.h"\n')
        _, found = check(d)
        assert len(found) == 4, found
        assert any(f.startswith("src/http/h.c:1: includes leafd/v1/leafd.pb-c.h, "
                                "protoc-c's") for f in found), found
        assert any(f.startswith("src/core/log.c:3: includes segment.h, which is in "
                                "segment/, above core/") for f in found), found
        assert any(f.startswith("src/extra/x.c: not in a declared layer") for f in found), found
        assert any("the same name as" in f for f in found), found
    print("check_layers: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    rank, problems = check(sys.argv[1] if len(sys.argv) > 1 else ".")
    for p in problems:
        print(p)
    if problems:
        print("check_layers: %d finding(s)" % len(problems))
        return 1
    print("check_layers: %d files in %d layers, no upward include" % (len(rank), TOP))
    return 0


if __name__ == "__main__":
    sys.exit(main())
