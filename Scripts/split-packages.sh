#!/usr/bin/env bash
# Splits the project into the repositories that users depend on by URL and version:
#
#   Scripts/split-packages.sh OUT VERSION ROOT_URL
#
# makes, in OUT, one git repository per package, each with one commit of this checkout's
# HEAD and the tag VERSION:
#
#   OUT/MagicMirror             the root package, as it is
#   OUT/MagicMirrorEncryption   Adapters/Encryption
#   OUT/MagicMirrorPostgreSQL   Adapters/PostgreSQL
#
# In the side packages, `.package(name: "MagicMirror", path: "../..")` becomes
# `.package(url: "ROOT_URL", from: "VERSION")`, and files linked from the root (the
# PostgreSQL benchmark shares mirror-bench's) are copied. Publish each repository under the
# URL its name gives (ROOT_URL for the root: the side packages name it), then apps write:
#
#   .package(url: "ROOT_URL", from: "VERSION"),
#   .package(url: ".../MagicMirrorPostgreSQL.git", from: "VERSION"),
#
# Why split repositories, not package traits: SwiftPM resolves every dependency a package
# declares, traits or not, so a root manifest naming postgres-nio behind a trait would make
# `swift build` fetch it on every clone; and a package in a subfolder can only be used by
# path, and is named after its folder. Scripts/check-split-packages.sh checks the result with
# a consumer package that depends on the three repositories by file:// URL and version.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 OUT VERSION ROOT_URL" >&2; exit 2; }
out=$1 version=$2 root_url=$3
top=$(cd "$(dirname "$0")/.." && pwd)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "split-packages: VERSION must be semantic (1.2.3), not $version" >&2; exit 2; }
[ ! -e "$out" ] || [ -z "$(ls -A "$out")" ] || { echo "split-packages: $out is not empty" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

commit_and_tag() {  # DIR
    git -C "$1" init -q
    git -C "$1" add -A
    git -C "$1" -c user.name=split-packages -c user.email=split-packages@localhost \
        commit -q -m "MagicMirror $version, split from $(git -C "$top" rev-parse --short HEAD)"
    git -C "$1" tag "$version"
}

# The root: the committed tree of HEAD.
mkdir "$out/MagicMirror"
git -C "$top" archive HEAD | tar -x -C "$out/MagicMirror"
commit_and_tag "$out/MagicMirror"

for side in Encryption PostgreSQL; do
    name=MagicMirror$side
    destination="$out/$name"
    mkdir "$destination"
    git -C "$top" archive HEAD "Adapters/$side" | tar -x -C "$destination" --strip-components=2
    # Links into the root's tree: their files.
    while IFS= read -r link; do
        target=$(readlink "$link")
        source="$top/Adapters/$side/${link#"$destination/"}"
        resolved="$(cd "$(dirname "$source")" && cd "$(dirname "$target")" && pwd)/$(basename "$target")"
        rm "$link" && cp "$resolved" "$link"
    done < <(find "$destination" -type l)
    manifest="$destination/Package.swift"
    grep -q '.package(name: "MagicMirror", path: "../..")' "$manifest" || {
        echo "split-packages: $manifest does not name the root by path as expected" >&2; exit 1; }
    sed -i "s|.package(name: \"MagicMirror\", path: \"../..\")|.package(url: \"$root_url\", from: \"$version\")|" "$manifest"
    # The root's product references name its package by its identity now: the URL's last part.
    identity=$(basename "$root_url" .git)
    sed -i "s|package: \"MagicMirror\")|package: \"$identity\")|g" "$manifest"
    commit_and_tag "$destination"
done
echo "split-packages: $out/{MagicMirror,MagicMirrorEncryption,MagicMirrorPostgreSQL} at $version"
