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
