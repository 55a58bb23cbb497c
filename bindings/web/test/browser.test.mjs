// The web package in a real browser: Debian's Chromium, headless, driven by playwright-core,
// loads pkg/web from a local HTTP server and simulates the repo's scenarios (among them the
// three-stage host/examples/fleet-rollout.yaml); each report equals the Node package's, byte for
// byte. Chromium missing is a failure, not a skip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { basename, join, relative } from "node:path";
import { chromium } from "playwright-core";
import { loadScenario, pkgWebDir, root, scenarioFiles, wasm, webDir } from "../testing/support.mjs";

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };

test("in headless Chromium, simulate gives the Node package's reports byte for byte", async (t) => {
  if (!existsSync(executablePath)) {
    throw new Error(`Chromium is not installed at ${executablePath}: run \`apt-get install -y chromium chromium-driver\` `
      + "(tests/run.sh does when run as root) or set CHROMIUM_PATH");
  }
  const server = await serve();
  t.after(() => server.close());
  const browser = await chromium.launch({ executablePath, args });
  t.after(() => browser.close());
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  assert.equal(await page.evaluate(() => window.waverun.ready), true, problems.join("\n"));

  const files = scenarioFiles();
  assert.ok(files.some((f) => f.endsWith("host/examples/fleet-rollout.yaml")));
  for (const file of files) {
    const scenario = loadScenario(file);
    const inBrowser = await page.evaluate((s) => window.waverun.simulate(s), scenario);
    assert.equal(inBrowser, JSON.stringify(wasm.simulate(scenario), null, 2), relative(root, file));
  }
  const multiStage = loadScenario(join(root, "host/examples/fleet-rollout.yaml"));
  const report = JSON.parse(await page.evaluate((s) => window.waverun.simulate(s), multiStage));
  assert.deepEqual(report.run.status.stages.map((s) => s.name), ["dev", "canary", "prod"]);

  const refusal = await page.evaluate(() => window.waverun.refusal({ stages: [{ name: "s", groups: [{ name: "g", maxConcurrency: "0" }] }] }));
  assert.deepEqual({ ...refusal, message: undefined }, {
    isError: true, name: "WaverunError", code: "InvalidField", path: "stages[0].groups[0].maxConcurrency",
    fields: [{ path: "stages[0].groups[0].maxConcurrency", message: refusal.fields[0].message }], message: undefined,
  });
  assert.deepEqual(problems, []);
});

/** pkg/web under /pkg/ and the test page at /, on 127.0.0.1 and a free port. */
function serve() {
  const page = readFileSync(join(webDir, "testing/browser/index.html"));
  const server = createServer((req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    const file = path === "/" ? null : path.startsWith("/pkg/") ? join(pkgWebDir, basename(path)) : undefined;
    if (file === null) return res.writeHead(200, { "content-type": types[".html"] }).end(page);
    if (!file || !existsSync(file)) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": types[file.slice(file.lastIndexOf("."))] ?? "application/octet-stream" });
    res.end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}
