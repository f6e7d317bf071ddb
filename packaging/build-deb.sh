#!/bin/sh
# build-deb.sh [OUTDIR] — build elasticd's Debian package from this source tree
# with Debian 12's toolchain: dpkg-buildpackage -us -uc -b, in a scratch copy
# of the tree with packaging/debian as its debian/ (the source tree itself
# keeps no debian/ directory and gets no build output). The .deb, .changes and
# .buildinfo land in OUTDIR (default: build-deb/ at the top of the tree).
#
# Needs dpkg-dev, debhelper and the other Build-Depends of
# packaging/debian/control (dpkg-checkbuilddeps says what is missing); no root
# (Rules-Requires-Root: no).
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The package's upstream version must be the project's.
meson_version=$(sed -n "s/^[[:space:]]*version: '\([^']*\)'.*/\1/p" "$src/meson.build" | head -n 1)
deb_version=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$src/packaging/debian/changelog")
if [ "${deb_version%-*}" != "$meson_version" ]; then
	echo "build-deb.sh: packaging/debian/changelog says $deb_version, meson.build $meson_version" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/elasticd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
tree=$work/elasticd-$meson_version
mkdir "$tree"

# The source files: what git tracks plus new files it does not ignore, or,
# outside a git checkout, everything but build directories.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard) |
		(cd "$src" && xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\n" "$f"; done' sh) |
		(cd "$src" && tar -cf - -T -) | tar -xf - -C "$tree"
else
	(cd "$src" && tar -cf - --exclude='./build*' --exclude=./.git .) | tar -xf - -C "$tree"
fi
rm -rf "$tree/debian"
cp -R "$src/packaging/debian" "$tree/debian"
chmod +x "$tree/debian/rules"

(cd "$tree" && dpkg-buildpackage -us -uc -b)

for f in "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo; do
	[ -f "$f" ] && cp "$f" "$out/"
done
ls "$out"/elasticd_"$deb_version"_*.deb
