#!/usr/bin/env bash
# Step 1 of the Action: install cardsign INPUT_VERSION for this runner's
# platform, the way cosign-installer does. The archive's SHA-256 must equal
# the one this Action pins for that version (checksums/VERSION beside this
# script, a copy of the release's SHA256SUMS committed when the release was
# made), and the release's own SHA256SUMS must agree; anything else is
# refused before the archive is unpacked. The binary is kept in the runner's
# tool cache, so later jobs on the same runner skip the download.
#
# With INPUT_VERSION source, cardsign is built from the Action's own
# checkout instead (Go on the runner): what works before a release's
# checksums are pinned here.
#
# Environment: INPUT_VERSION, INPUT_RELEASE_BASE_URL (a mirror; default
# GitHub's releases of cardsign/cardsign), and the runner's RUNNER_TEMP,
# RUNNER_TOOL_CACHE, RUNNER_OS, RUNNER_ARCH, GITHUB_OUTPUT, GITHUB_PATH.
# Output: cardsign-path.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=lib.sh
. "$here/lib.sh"

version=${INPUT_VERSION:-}
if [ "$version" = source ]; then
  # Built from the Action's own checkout: the runner fetched it at the
  # commit the workflow pins (uses: cardsign/cardsign@SHA), so that SHA pins
  # the source, and Go's checksum database (go.sum) the dependencies.
  root=$(cd "$here/../.." && pwd)
  [ -f "$root/go.mod" ] && [ -d "$root/cmd/cardsign" ] ||
    fail "input version source builds cardsign from the Action's checkout, but $(q "$root") holds no cardsign source"
  command -v go >/dev/null 2>&1 ||
    fail "input version source builds cardsign with Go, and this runner has no go on PATH: add actions/setup-go before this step, or use a release version"
  out="${RUNNER_TEMP:-/tmp}/cardsign-source/bin"
  mkdir -p "$out"
  rev=$(git -C "$root" rev-parse HEAD 2>/dev/null || true)
  echo "building cardsign from the Action's checkout${rev:+ at $rev}"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -tags nopkcs11 \
    -ldflags "-X github.com/cardsign/cardsign/buildinfo.revision=$rev" -o "$out/cardsign" ./cmd/cardsign) ||
    fail "building cardsign from $(q "$root") failed: see go's message above"
  echo "$out" >>"$GITHUB_PATH"
  set_output cardsign-path "$out/cardsign"
  exit 0
fi
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  fail "input version must be a release tag like v0.1.0, or source, got $(q "$version")"

os=${RUNNER_OS:-$(uname -s)}
case $os in
  Linux | linux) os=linux ;;
  *) fail "cardsign releases are built for Linux runners; this runner is $(q "$os")" ;;
esac
arch=${RUNNER_ARCH:-$(uname -m)}
case $arch in
  X64 | x86_64 | amd64) arch=amd64 ;;
  ARM64 | aarch64 | arm64) arch=arm64 ;;
  *) fail "cardsign releases are built for amd64 and arm64 runners; this runner is $(q "$arch")" ;;
esac
archive="cardsign_${version}_${os}_${arch}.tar.gz"

# sum_of FILE NAME prints the checksum FILE (sha256sum format) lists for NAME.
sum_of() { awk -v f="$2" '$2 == f || $2 == "*" f { print $1 }' "$1"; }

pins="$here/checksums/$version"
[ -f "$pins" ] || fail "this version of the Action pins no checksums for cardsign $version (no $pins): use a version it pins ($(ls "$here/checksums" | grep '^v' | tr '\n' ' ')) or a newer commit of the Action"
want=$(sum_of "$pins" "$archive")
[[ $want =~ ^[0-9a-f]{64}$ ]] || fail "checksums/$version pins no SHA-256 for $archive"

cache="${RUNNER_TOOL_CACHE:-$RUNNER_TEMP/tool-cache}/cardsign/${version#v}/$arch"
if [ -x "$cache/cardsign" ] && [ "$(cat "$cache/.archive-sha256" 2>/dev/null)" = "$want" ]; then
  echo "cardsign $version ($arch) from the tool cache: $cache"
else
  base=${INPUT_RELEASE_BASE_URL:-https://github.com/cardsign/cardsign/releases/download}
  one_line release-base-url "$base"
  [[ $base == https://* ]] || fail "input release-base-url must be an https URL, got $(q "$base")"
  base=${base%/}
  tmp=$(mktemp -d "${RUNNER_TEMP:-/tmp}/cardsign-install.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  for f in "$archive" SHA256SUMS; do
    echo "downloading $base/$version/$f"
    curl --fail --silent --show-error --location --proto '=https' --proto-redir '=https' --retry 3 \
      --output "$tmp/$f" "$base/$version/$f" || fail "downloading $(q "$base/$version/$f") failed"
  done
  got=$(sha256sum "$tmp/$archive" | cut -d' ' -f1)
  [ "$got" = "$want" ] ||
    fail "checksum mismatch: $archive from $(q "$base") has SHA-256 $got, the Action pins $want for $version: refusing to install it"
  published=$(sum_of "$tmp/SHA256SUMS" "$archive")
  [ "$published" = "$want" ] ||
    fail "the release's SHA256SUMS lists $(q "$published") for $archive, the Action pins $want: refusing to install it"
  mkdir "$tmp/x"
  tar -xzf "$tmp/$archive" -C "$tmp/x" cardsign
  mkdir -p "$cache"
  install -m 0755 "$tmp/x/cardsign" "$cache/cardsign"
  echo "$want" >"$cache/.archive-sha256"
  echo "installed cardsign $version ($arch, SHA-256 $want) in $cache"
fi
echo "$cache" >>"$GITHUB_PATH"
set_output cardsign-path "$cache/cardsign"
