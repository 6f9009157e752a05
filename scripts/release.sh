#!/usr/bin/env bash
# scripts/release.sh VERSION — static release binaries of taskbridge and their checksums.
#
#   scripts/release.sh v1.2.3                       linux and darwin × amd64 and arm64 into dist/
#   TARGETS=linux/amd64 DIST=/tmp/d scripts/release.sh v1.2.3     one target, another directory
#
# Each target is built with CGO_ENABLED=0 (the SQLite store is pure Go, so the binary is
# static and runs on scratch or distroless images) and -trimpath (no build paths inside),
# and stamped with the version, the git revision and the build date, which
# "taskbridge version" prints. For each target DIST holds the bare binary
# taskbridge_VERSION_OS_ARCH and an archive taskbridge_VERSION_OS_ARCH.tar.gz (binary,
# README.md, taskbridge.example.yaml, deploy/); DIST/SHA256SUMS lists the SHA-256 of every
# file, in the format "sha256sum -c SHA256SUMS" checks.
#
# SOURCE_DATE_EPOCH, when set, is the build date (reproducible builds); otherwise now.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/release.sh VERSION   (VERSION like v1.2.3 or v1.2.3-rc.1)" >&2; exit 2; }
[ $# -eq 1 ] || usage
VERSION=$1
# The version is also what "go install …@VERSION" resolves: a semantic version tag with a v.
if ! [[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]]; then
	echo "release.sh: version $VERSION is not a semantic version like v1.2.3" >&2
	usage
fi
TARGETS=${TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
DIST=${DIST:-dist}

epoch=${SOURCE_DATE_EPOCH:-$(date +%s)}
build_date=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
revision=unknown
if git rev-parse --git-dir >/dev/null 2>&1; then
	revision=$(git rev-parse HEAD)
	if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
		revision="$revision+dirty"
		echo "release.sh: warning: the work tree has uncommitted changes; the revision is stamped $revision" >&2
	fi
fi

mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
ldflags="-s -w -X main.version=$VERSION -X main.revision=$revision -X main.buildDate=$build_date"
names=()
for target in $TARGETS; do
	os=${target%/*}; arch=${target#*/}
	case "$target" in
	linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64) ;;
	*) echo "release.sh: target $target is not one of linux/amd64 linux/arm64 darwin/amd64 darwin/arm64" >&2; exit 2 ;;
	esac
	name="taskbridge_${VERSION}_${os}_${arch}"
	echo "== $target → $DIST/$name"
	# -buildvcs=false: the revision is stamped above, the same way in a clone, a git
	# worktree (where go records none) and a source tarball.
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "$ldflags" \
		-o "$DIST/$name" ./cmd/taskbridge
	stage=$(mktemp -d)
	mkdir "$stage/$name"
	cp "$DIST/$name" "$stage/$name/taskbridge"
	cp -r README.md taskbridge.example.yaml deploy "$stage/$name/"
	tar -C "$stage" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -cf - "$name" |
		gzip -n -9 >"$DIST/$name.tar.gz"
	rm -rf "$stage"
	names+=("$name" "$name.tar.gz")
done
(cd "$DIST" && sha256sum "${names[@]}" >SHA256SUMS)
echo "== $DIST/SHA256SUMS"
cat "$DIST/SHA256SUMS"
