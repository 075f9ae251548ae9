#!/usr/bin/env bash
# Checks Scripts/split-packages.sh: splits this checkout into three repositories (in a
# temporary directory, with file:// URLs), then resolves a consumer package that depends on
# all three by URL and version, as an app would, and checks what it got: each package at the
# version, and swift-crypto (which both adapters use) once.
#
#   Scripts/check-split-packages.sh            (run by .ci/run)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/magicmirror-split.XXXXXX)
trap 'rm -rf "$work"' EXIT
version=9.8.7
"$top/Scripts/split-packages.sh" "$work/repositories" "$version" "file://$work/repositories/MagicMirror"
mkdir -p "$work/App/Sources/App"
cat > "$work/App/Package.swift" <<MANIFEST
// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "file://$work/repositories/MagicMirror", from: "$version"),
        .package(url: "file://$work/repositories/MagicMirrorEncryption", from: "$version"),
        .package(url: "file://$work/repositories/MagicMirrorPostgreSQL", from: "$version"),
    ],
    targets: [
        .executableTarget(name: "App", dependencies: [
            .product(name: "MagicMirror", package: "MagicMirror"),
            .product(name: "MagicMirrorEncryption", package: "MagicMirrorEncryption"),
            .product(name: "MagicMirrorPostgreSQL", package: "MagicMirrorPostgreSQL"),
        ]),
    ]
)
MANIFEST
echo 'import MagicMirror' > "$work/App/Sources/App/main.swift"
dependencies=$(swift package --package-path "$work/App" show-dependencies --format json)
fail=0
for name in MagicMirror MagicMirrorEncryption MagicMirrorPostgreSQL; do
    count=$(printf '%s' "$dependencies" | python3 -c "
import json, sys
def walk(node):
    yield node
    for child in node.get('dependencies', []): yield from walk(child)
found = {(n['identity'], n['version']) for n in walk(json.load(sys.stdin)) if n['identity'] == '${name,,}'}
print(len(found), *sorted(v for _, v in found))")
    if [ "$count" != "1 $version" ]; then echo "check-split-packages: $name resolved as: $count" >&2; fail=1; fi
done
crypto=$(printf '%s' "$dependencies" | python3 -c "
import json, sys
def walk(node):
    yield node
    for child in node.get('dependencies', []): yield from walk(child)
print(len({(n['identity'], n['version']) for n in walk(json.load(sys.stdin)) if n['identity'] == 'swift-crypto'}))")
if [ "$crypto" != 1 ]; then echo "check-split-packages: swift-crypto resolved $crypto times" >&2; fail=1; fi
[ $fail -eq 0 ] && echo "check-split-packages: an app resolves MagicMirror, MagicMirrorEncryption and MagicMirrorPostgreSQL $version by URL, with one swift-crypto"
exit $fail
