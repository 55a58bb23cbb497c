// The README's `js` examples, each run as a module against the generated Node package (its
// `import ... from "waverun-wasm"` pointed at pkg/node). The `ts` example is type-checked by
// types.test.mjs.
import { test } from "node:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { pkgNodeDir, webDir } from "../testing/support.mjs";

const readme = readFileSync(join(webDir, "README.md"), "utf8");
const examples = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
const pkg = pathToFileURL(join(pkgNodeDir, "waverun_wasm.js")).href;

test("the README has runnable examples", (t) => {
  if (examples.length < 3) throw new Error(`expected at least 3 js examples, found ${examples.length}`);
});

examples.forEach((code, i) => {
  const title = code.split("\n").find((l) => l.startsWith("import {"))?.trim() ?? "";
  test(`README example ${i + 1} runs (${title})`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "waverun-readme-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, `example-${i + 1}.mjs`);
    writeFileSync(file, code.replaceAll('from "waverun-wasm"', `from ${JSON.stringify(pkg)}`));
    await import(pathToFileURL(file).href);
  });
});
