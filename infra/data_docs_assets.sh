#!/usr/bin/env bash
# Idempotent: the Data Docs pages' CSS and JavaScript (infra/npm/data-docs.txt) from the npm
# registry, unpacked into .assets/data-docs/<package>/ (package tarballs only, no install
# scripts, no dependencies: the pages load the packages' prebuilt dist files). A second run
# with an unchanged list does nothing. $SKEWLAB_ASSETS names another folder to fill.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
list="$root/infra/npm/data-docs.txt"
dest="${SKEWLAB_ASSETS:-$root/.assets}/data-docs"
stamp="$dest/.skewlab-assets"
want="$(sha256sum "$list" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: npm is required to fetch the Data Docs assets (Debian: apt-get install npm)" >&2
  exit 1
fi
echo "setup: fetching the Data Docs CSS and JavaScript from the npm registry into $dest" >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tarballs" "$work/out"
grep -v '^\s*\(#\|$\)' "$list" | while read -r spec; do
  name="${spec%@*}"
  (cd "$work/tarballs" && npm pack --silent --ignore-scripts "$spec" >/dev/null)
  tarball="$(ls -t "$work/tarballs"/*.tgz | head -1)"
  mkdir -p "$work/out/$name"
  tar -xzf "$tarball" -C "$work/out/$name" --strip-components=1
  rm -f "$tarball"
done
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.tmp"
mv "$work/out" "$dest.tmp"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$want" > "$stamp"
echo "setup: Data Docs assets ready" >&2
