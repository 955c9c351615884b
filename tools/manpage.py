#!/usr/bin/env python3
"""manpage.py LEAFD: leafd(8), printed, made from `LEAFD --help` and
`LEAFD --version` (the Debian package builds it; debian/rules).

--help is: the usage lines; blocks of text, where a line "  TERM  TEXT"
(two spaces in, two or more between) is a list item; then "Keys:" and a
table, one line "KEY TYPE RANGE DEFAULT" and one indented help line per key.
A block whose items are all options (-x, --xyz) becomes OPTIONS, the rest
DESCRIPTION; the table becomes CONFIGURATION KEYS. The date is
SOURCE_DATE_EPOCH's (dpkg-buildpackage sets it from debian/changelog), so
the page is the same on every build of one version.
"""
import datetime
import os
import re
import subprocess
import sys

ITEM = re.compile(r"^  (\S.*?)\s{2,}(\S.*)$")

FILES = [
    ("/etc/leafd/leafd.conf", "the configuration leafd.service reads (a conffile)"),
    ("/var/lib/leafd/", "the service's state (StateDirectory=): leafd.db, the SQLite "
     "file of the segment ranges, and snowflake-cache.json, the worker ID and "
     "clock fence"),
    ("/lib/systemd/system/leafd.service", "the hardened unit; systemctl start, "
     "stop, reload (SIGHUP) leafd"),
    ("/usr/share/doc/leafd/", "README, the operations guide, the HTTP API "
     "(http-api.md) and the configuration (configuration.md)"),
]


def esc(text):
    """Text for roff: backslashes and hyphens escaped, no line that starts
    with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "'") else text


def blocks(lines):
    out, cur = [], []
    for line in lines:
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def render_block(block, out):
    """Paragraph lines as text, "  TERM  TEXT" lines as .TP items."""
    para = []
    for line in block:
        m = ITEM.match(line)
        if m:
            if para:
                out += [".PP", esc(" ".join(para))]
                para = []
            out += [".TP", "\\fB%s\\fR" % esc(m.group(1)), esc(m.group(2))]
        else:
            para.append(line.strip())
    if para:
        out += [".PP", esc(" ".join(para))]


def keys_section(lines, out):
    """The table: 'KEY TYPE RANGE DEFAULT' then indented help lines."""
    if not lines or not lines[0].startswith("KEY "):
        sys.exit("manpage.py: no KEY header after Keys:")
    out += [".SH CONFIGURATION KEYS",
            "Each key can be set in the file (\\fBkey = value\\fR), in the "
            "environment (\\fBLEAFD_\\fR and the key in capitals, dots as "
            "underscores: \\fBLEAFD_LISTEN_PORT=9000\\fR) or on the command "
            "line (\\fB\\-\\-listen.port=9000\\fR); later wins: file, "
            "environment, flags."]
    n = 0
    for line in lines[1:]:
        if not line.strip():
            continue
        if line[0].isspace():
            out.append(esc(line.strip()))
            continue
        f = re.split(r"\s{2,}", line.strip())
        if len(f) < 3:
            sys.exit("manpage.py: cannot read key line %r" % line)
        key, typ, rest = f[0], f[1], f[2:]
        rng = rest[0]
        dflt = " ".join(rest[1:]) if len(rest) > 1 else ""
        dflt = "" if dflt == '""' else dflt
        out += [".TP", "\\fB%s\\fR (%s, %s)" % (esc(key), esc(typ), esc(rng))]
        if dflt and dflt != "(see help)":
            out.append("Default: \\fB%s\\fR." % esc(dflt))
            out.append(".br")
        elif not dflt:
            out.append("Default: empty.")
            out.append(".br")
        n += 1
    if n == 0:
        sys.exit("manpage.py: no keys in the table")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: manpage.py LEAFD")
    prog = sys.argv[1]
    helptext = subprocess.run([prog, "--help"], check=True, capture_output=True,
                              text=True).stdout
    version = subprocess.run([prog, "--version"], check=True, capture_output=True,
                             text=True).stdout.split()[-1]
    when = datetime.datetime.fromtimestamp(
        int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or datetime.datetime.now().timestamp(),
        tz=datetime.timezone.utc)
    lines = helptext.splitlines()
    if "Keys:" not in lines:
        sys.exit("manpage.py: no Keys: line in --help")
    k = lines.index("Keys:")
    head, table = blocks(lines[:k]), lines[k + 1:]

    out = ['.\\" leafd(8), made by tools/manpage.py from leafd --help.',
           '.TH LEAFD 8 "%s" "leafd %s" "System Administration Utilities"'
           % (when.strftime("%Y-%m-%d"), esc(version)),
           # ragged right: --help has long unbreakable words (URLs, key
           # names) that a justified line cannot take without a warning
           ".ad l",
           ".SH NAME", "leafd \\- distributed unique\\-ID server, Leaf\\-style",
           ".SH SYNOPSIS", ".nf"]
    for line in head[0]:
        # "usage: " and the lines under it are 7 wide
        out.append(esc(line[7:] if line.startswith(("usage: ", " " * 7)) else line))
    out += [".fi", ".SH DESCRIPTION"]
    options = []
    for block in head[1:]:
        items = [ITEM.match(line) for line in block]
        if all(items) and all(m.group(1).startswith("-") for m in items):
            options.append(block)
        else:
            render_block(block, out)
    if options:
        out.append(".SH OPTIONS")
        for block in options:
            render_block(block, out)
    keys_section(table, out)
    out += [".SH FILES"]
    for path, what in FILES:
        out += [".TP", "\\fI%s\\fR" % esc(path), esc(what)]
    out += [".SH SIGNALS", ".TP", "\\fBSIGTERM\\fR, \\fBSIGINT\\fR",
            "stop accepting, finish the requests in flight (shutdown_timeout_ms), exit 0",
            ".TP", "\\fBSIGHUP\\fR",
            "reopen log.file, re\\-read log.level, refresh the tag list",
            ".SH EXIT STATUS",
            "0 after a clean stop or a good \\fB\\-\\-check\\-config\\fR; "
            "2 for a configuration error (leafd.service does not restart on it); "
            "another non\\-zero status for any other failure.",
            ".SH SEE ALSO", "\\fBsystemctl\\fR(1), \\fBsystemd.exec\\fR(5), "
            "/usr/share/doc/leafd/operations.md"]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
