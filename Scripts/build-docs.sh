#!/usr/bin/env bash
# Builds the DocC documentation of MagicMirror and MirrorTesting with the toolchain's own
# `docc`, and fails on any warning (a broken link, an unknown parameter, a symbol that does
# not exist on this platform).
#
#   Scripts/build-docs.sh            archives in .build/docs/<Module>.doccarchive
#
# Symbol graphs come from `swift package dump-symbol-graph`; each catalog is converted with
# its own module's graphs (links into another module are written as code, not as links:
# a per-module build cannot resolve them).
set -euo pipefail
cd "$(dirname "$0")/.."

docc=$(xcrun --find docc 2>/dev/null || command -v docc) || {
    echo "build-docs: no docc in this toolchain" >&2
    exit 1
}
graphs=$(swift package dump-symbol-graph --minimum-access-level public --emit-extension-block-symbols 2>&1 | sed -n 's/^Files written to //p')
[ -d "$graphs" ] || { echo "build-docs: swift package dump-symbol-graph wrote no symbol graphs" >&2; exit 1; }

output=.build/docs
rm -rf "$output" && mkdir -p "$output"
status=0
for module in MagicMirror MirrorTesting; do
    module_graphs="$output/$module-symbolgraphs"
    mkdir -p "$module_graphs"
    cp "$graphs/$module.symbols.json" "$graphs/$module"@*.symbols.json "$module_graphs/"
    log="$output/$module.log"
    if ! "$docc" convert "Sources/$module/Documentation.docc" \
        --additional-symbol-graph-dir "$module_graphs" \
        --output-path "$output/$module.doccarchive" \
        --warnings-as-errors >"$log" 2>&1 || grep -q 'warning:' "$log"; then
        cat "$log" >&2
        echo "build-docs: $module has warnings or errors (above)" >&2
        status=1
    else
        echo "build-docs: $module: $output/$module.doccarchive, no warnings"
    fi
done
exit $status
