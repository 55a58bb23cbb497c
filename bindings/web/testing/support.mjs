// Shared by the tests in ../test (kept outside test/, where `node --test` would run it as a test
// file): where things are, the generated Node package, the repo's scenarios and the native CLI.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";

export const webDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const root = resolve(webDir, "../..");
export const pkgNodeDir = join(webDir, "pkg/node");
export const pkgWebDir = join(webDir, "pkg/web");

const built = join(pkgNodeDir, "waverun_wasm.js");
if (!existsSync(built) || !existsSync(join(pkgWebDir, "waverun_wasm.js"))) {
  throw new Error(`the package is not built (${built} missing): run bindings/web/build.sh`);
}

/** The generated Node package. */
export const wasm = createRequire(import.meta.url)(built);

/** Every scenario file of the repo: the YAML files under tests/scenarios (recursively) and host/examples
 * (but host/examples/waverun.yaml, the daemon's config example). */
export function scenarioFiles() {
  const files = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (/\.(ya?ml|json)$/.test(e.name) && join(dir, e.name) !== join(root, "host/examples/waverun.yaml")) files.push(join(dir, e.name));
    }
  };
  walk(join(root, "tests/scenarios"));
  walk(join(root, "host/examples"));
  return files;
}

/** A scenario file as the JS value `simulate` takes (YAML 1.2, as the CLI reads it). */
export function loadScenario(file) {
  return YAML.parse(readFileSync(file, "utf8"));
}

/** The native CLI (from `cargo test --workspace --no-run`, as tests/run.sh builds it, or
 * `cargo build -p waverun`), honouring CARGO_TARGET_DIR. */
export function nativeCli() {
  const bin = process.env.WAVERUN_BIN ??
    join(process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, "target"), "debug/waverun");
  if (!existsSync(bin)) {
    throw new Error(`the native CLI ${bin} is missing: run \`cargo test --workspace --no-run\` (or set WAVERUN_BIN)`);
  }
  return bin;
}

/** What `waverun ARGS...` prints (without the final newline). */
export function native(...args) {
  return execFileSync(nativeCli(), args, { encoding: "utf8", maxBuffer: 64 << 20 }).replace(/\n$/, "");
}
