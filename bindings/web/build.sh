#!/usr/bin/env bash
# Builds the browser package from source into bindings/web/pkg/{node,web} (not committed):
#   1. wasm-bindgen-cli, pinned to the wasm-bindgen crate's version (installed if missing);
#   2. the crate for wasm32-unknown-unknown twice, in the workspace's `wasm` profile (LTO, one
#      codegen unit, panic=abort), stripping debug info only (the `target_features` section
#      tells wasm-bindgen and wasm-opt which Wasm features are used):
#      - for browsers (`pkg/web`, profile `wasm-web`) at opt-level "z": the module is downloaded,
#        so size comes first (~265 KiB gzipped; opt-level 3 would be ~415 KiB);
#      - for Node (`pkg/node`, profile `wasm-node`) at opt-level 3: nothing is downloaded, and the
#        engine runs about 1.7x faster than at "z".
#      The same source and the same decisions (the tests compare both builds' reports byte for
#      byte); WAVERUN_WEB_OPT_LEVEL / WAVERUN_NODE_OPT_LEVEL (0-3, s, z) override the levels;
#   3. wasm-bindgen --target web / --target nodejs;
#   4. wasm-opt from the npm package binaryen@132 (package-lock.json; Debian's binaryen 108 breaks
#      wasm-bindgen output): -Oz for the browser module (kept only when it makes the gzipped
#      module smaller), -O3 for Node's;
#   5. prints both modules' raw and gzipped sizes.
# Idempotent; run from anywhere. Needs cargo, rustup and npm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

WASM_BINDGEN_VERSION=0.2.130
# The target directory (CARGO_TARGET_DIR or the workspace's) and the crate's version.
read -r target_dir version < <(cargo metadata --format-version 1 --no-deps | node -e '
  let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
    const m = JSON.parse(s);
    console.log(m.target_directory, m.packages.find(p => p.name === "waverun-wasm").version);
  });')

# 1. wasm-bindgen CLI (its version must equal the crate's).
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  echo "== installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (about 3 minutes)"
  # --locked first; when the registry index lacks a version the CLI's lock file names (seen with
  # webpki-roots), fall back to a fresh resolution of the same CLI version.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --locked ||
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown ||
  rustup target add wasm32-unknown-unknown

# 2. The modules.
level() {
  case "$1" in [0-3]) echo "$1" ;; s | z) echo "\"$1\"" ;; *) echo "$2: 0-3, s or z" >&2; exit 2 ;; esac
}
web_level=$(level "${WAVERUN_WEB_OPT_LEVEL:-z}" WAVERUN_WEB_OPT_LEVEL)
node_level=$(level "${WAVERUN_NODE_OPT_LEVEL:-3}" WAVERUN_NODE_OPT_LEVEL)
build() { # profile opt-level
  echo "== cargo build (wasm32-unknown-unknown, profile $1, opt-level $2)"
  cargo build --target wasm32-unknown-unknown -p waverun-wasm --profile "$1" \
    --config "profile.$1.inherits=\"wasm\"" \
    --config "profile.$1.opt-level=$2" \
    --config "profile.$1.strip=\"debuginfo\""
}
build wasm-web "$web_level"
build wasm-node "$node_level"

# 3. The JS packages, each with a package.json and the README.
rm -rf "$here/pkg"
for t in nodejs web; do
  out="$here/pkg/${t%js}"
  module="$target_dir/wasm32-unknown-unknown/wasm-${t%js}/waverun_wasm.wasm"
  wasm-bindgen --target "$t" --out-dir "$out" --remove-name-section --remove-producers-section "$module"
  # The raw Wasm exports (InitOutput, *_bg.wasm.d.ts) pass JS values as `any`: say `unknown`,
  # so that no `any` reaches a user's type checker.
  sed -i -E '/^(export const |    readonly )/s/\bany\b/unknown/g' "$out"/*.d.ts
  [ "$t" = web ] && type=module || type=commonjs
  cat >"$out/package.json" <<JSON
{
  "name": "waverun-wasm",
  "version": "$version",
  "description": "The waverun update-run engine (validate, plan, simulate, drive runs) for $( [ "$t" = web ] && echo browsers || echo Node )",
  "license": "Apache-2.0",
  "type": "$type",
  "main": "waverun_wasm.js",
  "types": "waverun_wasm.d.ts",
  "files": ["waverun_wasm.js", "waverun_wasm.d.ts", "waverun_wasm_bg.wasm", "waverun_wasm_bg.wasm.d.ts", "README.md"]
}
JSON
  cp "$here/README.md" "$out/"
done

# 4. wasm-opt (binaryen 132 from npm).
if [ ! -x "$here/node_modules/.bin/wasm-opt" ]; then
  (cd "$here" && npm ci --no-audit --no-fund) || echo "npm ci failed: skipping wasm-opt"
fi
gz() { gzip -9c "$1" | wc -c; }
raw() { wc -c <"$1"; }
web="$here/pkg/web/waverun_wasm_bg.wasm"
node="$here/pkg/node/waverun_wasm_bg.wasm"
echo "== wasm-bindgen output: browsers $(raw "$web") bytes, $(gz "$web") gzipped; Node $(raw "$node") bytes, $(gz "$node") gzipped"
if [ -x "$here/node_modules/.bin/wasm-opt" ]; then
  wasm_opt="$here/node_modules/.bin/wasm-opt"
  "$wasm_opt" --version
  # Browsers: -Oz without inlining (binaryen's inlining shrinks the raw module but grows the
  # gzipped one).
  "$wasm_opt" -Oz --strip-target-features \
    --one-caller-inline-max-function-size=0 --flexible-inline-max-function-size=0 \
    "$web" -o "$web.opt"
  if [ "$(gz "$web.opt")" -lt "$(gz "$web")" ]; then
    mv "$web.opt" "$web"
  else
    echo "wasm-opt did not shrink the gzipped browser module; keeping wasm-bindgen's"
    rm "$web.opt"
  fi
  # Node: for speed.
  "$wasm_opt" -O3 --strip-target-features "$node" -o "$node.opt"
  mv "$node.opt" "$node"
  echo "== after wasm-opt: browsers $(raw "$web") bytes, $(gz "$web") gzipped; Node $(raw "$node") bytes, $(gz "$node") gzipped"
else
  echo "== no wasm-opt (npm package binaryen missing): modules left as wasm-bindgen wrote them"
fi
echo "== package: $here/pkg/web (ES module, browsers) and $here/pkg/node (CommonJS, Node)"
