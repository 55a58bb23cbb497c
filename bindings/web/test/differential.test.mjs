// The package against the native CLI: for every scenario of the repo, `simulate` and `plan` give
// byte-for-byte what `waverun simulate -o json` and `waverun plan -o json` print.
import { test } from "node:test";
import assert from "node:assert/strict";
import { relative } from "node:path";
import { loadScenario, native, root, scenarioFiles, wasm } from "../testing/support.mjs";

const files = scenarioFiles();

test("there are scenarios to compare", () => {
  assert.ok(files.length >= 9, `found ${files.length} scenario files`);
});

for (const file of files) {
  const name = relative(root, file);
  test(`simulate ${name} matches waverun simulate -o json`, () => {
    const ours = JSON.stringify(wasm.simulate(loadScenario(file)), null, 2);
    assert.equal(ours, native("simulate", "-o", "json", file));
  });
  test(`plan ${name} matches waverun plan -o json`, () => {
    const ours = JSON.stringify(wasm.plan(loadScenario(file)), null, 2);
    assert.equal(ours, native("plan", "-o", "json", file));
  });
}

// The browser module (pkg/web, built for size) and the Node module (pkg/node, built for speed)
// are two builds of one source: both decide alike, byte for byte.
test("the browser build and the Node build give the same reports and plans", async () => {
  const { readFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { pathToFileURL } = await import("node:url");
  const { pkgWebDir } = await import("../testing/support.mjs");
  const web = await import(pathToFileURL(join(pkgWebDir, "waverun_wasm.js")).href);
  web.initSync({ module: readFileSync(join(pkgWebDir, "waverun_wasm_bg.wasm")) });
  for (const file of files) {
    const scenario = loadScenario(file);
    const name = relative(root, file);
    assert.equal(JSON.stringify(web.simulate(scenario)), JSON.stringify(wasm.simulate(scenario)), name);
    assert.equal(JSON.stringify(web.plan(scenario)), JSON.stringify(wasm.plan(scenario)), name);
  }
});
