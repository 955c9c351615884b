#!/bin/sh
# check_exports.sh ARCHIVE HEADER: fails, naming them, when ARCHIVE
# - defines a global symbol without the leafd_ prefix (it would clash with
#   the program that links it: its own xmalloc, util_*, ...);
# - does not define a function HEADER declares;
# - calls abort() (the library reports out-of-memory to its caller; an
#   assert() that fails is __assert_fail, not this).
# The Makefile runs it on each libleafd-client.a it makes.
set -u
archive=$1 header=$2
status=0
defined=$(nm -g --defined-only "$archive" | awk 'NF == 3 { print $3 }' | sort -u)
leaks=$(printf '%s\n' "$defined" | grep -v -e '^leafd_' -e '^$')
if [ -n "$leaks" ]; then
    echo "check_exports: $archive defines global symbols without the leafd_ prefix:" >&2
    printf '  %s\n' $leaks >&2
    status=1
fi
for f in $(grep -o '\bleafd_[a-z_0-9]*(' "$header" | tr -d '(' | sort -u); do
    if ! printf '%s\n' "$defined" | grep -qx "$f"; then
        echo "check_exports: $archive does not define $f (declared in $header)" >&2
        status=1
    fi
done
if objdump -r "$archive" | awk '{ sub(/[-+]0x[0-9a-f]+$/, "", $3) } $3 == "abort" { f = 1 } END { exit !f }'; then
    echo "check_exports: $archive calls abort()" >&2
    status=1
fi
[ $status -eq 0 ] && echo "check_exports: $archive defines only leafd_ symbols" \
    "($(printf '%s\n' "$defined" | wc -l)) and never calls abort()"
exit $status
