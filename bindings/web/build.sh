#!/usr/bin/env bash
# Builds the browser package from source into bindings/web/pkg/{node,web} (not committed):
#   1. wasm-bindgen-cli, pinned to the wasm-bindgen crate's version (installed if missing);
#   2. the crate for wasm32-unknown-unknown in profile `wasm-web`: the workspace's `wasm`
#      profile (LTO, one codegen unit, panic=abort) at opt-level "z", which shrinks the gzipped
#      module from ~425 KiB (opt-level 3) to ~270 KiB at about twice the simulation time
#      (WAVERUN_WEB_OPT_LEVEL=3 builds for speed), and stripping debug info only, so that the
#      `target_features` section tells wasm-bindgen and wasm-opt which Wasm features are used;
#   3. wasm-bindgen --target nodejs / --target web;
#   4. wasm-opt from the npm package binaryen@132 (package-lock.json; Debian's binaryen 108 breaks
#      wasm-bindgen output), kept only when it makes the gzipped module smaller;
#   5. prints the module's raw and gzipped size.
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

# 2. The module.
opt_level=${WAVERUN_WEB_OPT_LEVEL:-z}
case "$opt_level" in [0-3]) ;; s | z) opt_level="\"$opt_level\"" ;; *) echo "WAVERUN_WEB_OPT_LEVEL: 0-3, s or z" >&2; exit 2 ;; esac
echo "== cargo build (wasm32-unknown-unknown, profile wasm-web, opt-level $opt_level)"
cargo build --target wasm32-unknown-unknown -p waverun-wasm --profile wasm-web \
  --config 'profile.wasm-web.inherits="wasm"' \
  --config "profile.wasm-web.opt-level=${opt_level}" \
  --config 'profile.wasm-web.strip="debuginfo"'
module="$target_dir/wasm32-unknown-unknown/wasm-web/waverun_wasm.wasm"

# 3. The JS packages, each with a package.json and the README.
rm -rf "$here/pkg"
for t in nodejs web; do
  out="$here/pkg/${t%js}"
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

# 4. wasm-opt (binaryen 132 from npm), when it helps.
if [ ! -x "$here/node_modules/.bin/wasm-opt" ]; then
  (cd "$here" && npm ci --no-audit --no-fund) || echo "npm ci failed: skipping wasm-opt"
fi
gz() { gzip -9c "$1" | wc -c; }
raw() { wc -c <"$1"; }
bg="$here/pkg/node/waverun_wasm_bg.wasm"
echo "== wasm-bindgen output: $(raw "$bg") bytes, $(gz "$bg") gzipped"
if [ -x "$here/node_modules/.bin/wasm-opt" ]; then
  "$here/node_modules/.bin/wasm-opt" --version
  # -Oz without inlining: binaryen's inlining shrinks the raw module but grows the gzipped one.
  for t in node web; do
    f="$here/pkg/$t/waverun_wasm_bg.wasm"
    "$here/node_modules/.bin/wasm-opt" -Oz --strip-target-features \
      --one-caller-inline-max-function-size=0 --flexible-inline-max-function-size=0 \
      "$f" -o "$f.opt"
    if [ "$(gz "$f.opt")" -lt "$(gz "$f")" ]; then
      mv "$f.opt" "$f"
    else
      echo "wasm-opt did not shrink the gzipped $t module; keeping wasm-bindgen's"
      rm "$f.opt"
    fi
  done
  echo "== after wasm-opt: $(raw "$bg") bytes, $(gz "$bg") gzipped"
else
  echo "== no wasm-opt (npm package binaryen missing): module left as wasm-bindgen wrote it"
fi
echo "== package: $here/pkg/node (CommonJS, Node) and $here/pkg/web (ES module, browsers)"
