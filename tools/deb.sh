#!/bin/sh
# deb.sh: `make deb`. Builds the Debian packages leafd and leafd-dev
# (debian/) in a copy of the tree, build/deb/leafd-<version>/, so that
# dpkg-buildpackage writes its results to build/deb/ and nothing lands
# outside the repo; leaves build/leafd_<version>_<arch>.deb and
# build/leafd-dev_<version>_<arch>.deb, then runs lintian on the whole
# upload (source and both packages) and fails on any error or warning.
# The version is src/core/version.h's LEAFD_VERSION (debian/changelog is
# written into the copy from it; the repo has none).
#   DEB_JOBS=N   compile jobs (default 2)
set -e
cd "$(dirname "$0")/.."
version=$(sed -n 's/^#define LEAFD_VERSION "\([^"]*\)"$/\1/p' src/core/version.h)
if [ -z "$version" ]; then
    echo "deb.sh: no #define LEAFD_VERSION \"...\" in src/core/version.h" >&2
    exit 1
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
top=build/deb
src=$top/leafd-$version
rm -rf "$top" build/leafd_*.deb build/leafd-dev_*.deb
mkdir -p "$src"

# The copy: what git tracks plus new files it does not ignore, as they are
# in the work tree (so uncommitted edits are built); a tree without git:
# everything but the build outputs.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --no-recursion --ignore-failed-read -cf - | tar -xf - -C "$src"
    what="the tree at $(git describe --always --dirty 2>/dev/null)"
    when=$(git log -1 --format=%aD 2>/dev/null || date -R)
else
    tar --exclude=./build --exclude=./.git --exclude=./leafd --exclude=./leafd-asan \
        -cf - . | tar -xf - -C "$src"
    what="a tree without git"
    when=$(date -R)
fi

maint=$(sed -n 's/^Maintainer: //p' debian/control)
cat > "$src/debian/changelog" <<EOC
leafd ($version) unstable; urgency=medium

  * Built by make deb from $what.

 -- $maint  $when
EOC

(cd "$src" && dpkg-buildpackage -us -uc -j"${DEB_JOBS:-2}")
cp "$top/leafd_${version}_$arch.deb" "$top/leafd-dev_${version}_$arch.deb" build/
echo "deb.sh: build/leafd_${version}_$arch.deb build/leafd-dev_${version}_$arch.deb"
echo "deb.sh: lintian (fails on an error or a warning; info tags shown):"
lintian --fail-on error,warning --display-info "$top/leafd_${version}_$arch.changes"
echo "deb.sh: lintian clean"
