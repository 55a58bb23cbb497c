// The portal in a real browser: Debian's Chromium, headless, driven by playwright-core, against
// a real `waverun serve` (the debug build of tests/run.sh) with the simulated provider, a small
// fleet and a fast clock, on 127.0.0.1. Screenshots of every page are saved to
// target/portal-screenshots/ (light and dark). Chromium missing is a failure, not a skip.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { freePort } from "../harness.mjs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const bin = process.env.WAVERUN_BIN ?? join(root, "target/debug/waverun");
const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const shots = join(root, "target/portal-screenshots");
const TOKENS = { admin: "portal-admin-token", viewer: "portal-viewer-token" };
const sha = (t) => createHash("sha256").update(t).digest("hex");

// Six clusters in one region, Kubernetes 1.33.3 released there before the fleet clock starts,
// 30-minute upgrades; at 600× an upgrade takes 3 s of real time.
const FLEET = `start: 2026-12-07T00:00:00Z
members:
${["dev-1", "dev-2", "prod-1", "prod-2", "prod-3", "prod-4"].map((n) => `  - name: ${n}
    labels: {env: ${n.split("-")[0]}}
    region: eastus
    kubernetesVersion: 1.32.7
    nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202611.01.0}]
    behavior: {upgradeMinutes: 30}`).join("\n")}
releases:
  kubernetes:
    - {version: 1.32.7, available: {eastus: 2026-11-01T00:00:00Z}}
    - {version: 1.33.3, available: {eastus: 2026-12-01T00:00:00Z}}
    - {version: 1.33.4, available: {eastus: 2026-12-01T00:00:00Z}}
    - {version: 1.33.5, available: {eastus: 2026-12-01T00:00:00Z}}
  nodeImages:
    - {version: AKSUbuntu-2204gen2containerd-202611.01.0, available: {eastus: 2026-11-01T00:00:00Z}}
`;

const STRATEGY = `stages:
  - name: dev
    memberSelector: {byLabel: "env=dev"}
  - name: prod
    beforeGates:
      - {displayName: prod sign-off, type: Approval}
    groups:
      - name: prod
        memberSelector: {byLabel: "env=prod"}
        maxConcurrency: 2
`;

let dir, daemon, base, browser;
const logs = [];

async function startDaemon() {
  daemon = spawn(bin, ["serve", "--config", join(dir, "waverun.yaml")], { stdio: ["ignore", "pipe", "pipe"] });
  daemon.stdout.on("data", (d) => logs.push(String(d)));
  daemon.stderr.on("data", (d) => logs.push(String(d)));
  for (let i = 0; i < 600; i++) {
    if (daemon.exitCode !== null) throw new Error(`the daemon exited: ${logs.join("")}`);
    try {
      const r = await fetch(`${base}/readyz`);
      // On the harness's PostgreSQL, a lone replica follows until it has taken the lease.
      if (r.ok && !(await r.text()).split("\n").some((l) => l.startsWith("follower "))) return;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the daemon was not ready within 60 s: ${logs.join("")}`);
}

/**
 * The harness's store switch (tests/run.sh's second pass sets WAVERUN_TEST_POSTGRES): the
 * daemon keeps its state in a database of its own on that server instead of SQLite.
 */
function postgresStore() {
  const server = process.env.WAVERUN_TEST_POSTGRES;
  if (!server) return "";
  const db = `portal_${process.pid}_${Date.now()}`;
  execFileSync("psql", [server, "-qc", `CREATE DATABASE ${db}`]);
  return `store: {type: postgres, url: "${server} dbname=${db}", holder: portal}\n`;
}

before(async () => {
  if (!existsSync(executablePath)) {
    throw new Error(`Chromium is not installed at ${executablePath}: run \`apt-get install -y chromium\` `
      + "(tests/run.sh does when run as root) or set CHROMIUM_PATH");
  }
  if (!existsSync(bin)) throw new Error(`no waverun binary at ${bin}: build it (cargo build -p waverun) or set WAVERUN_BIN`);
  rmSync(shots, { recursive: true, force: true }); // only this run's screenshots, none left from an older one
  mkdirSync(shots, { recursive: true });
  dir = mkdtempSync(join(tmpdir(), "waverun-portal-"));
  const port = await freePort();
  writeFileSync(join(dir, "fleet.yaml"), FLEET);
  writeFileSync(join(dir, "waverun.yaml"), `listen: 127.0.0.1:${port}
dataDir: data
fleet: portal
timeScale: 600
fleetFile: fleet.yaml
webhooks: {allowLoopback: true, timeoutSeconds: 2}
${postgresStore()}tokens:
  - {name: alice, role: admin, sha256: ${sha(TOKENS.admin)}}
  - {name: victor, role: viewer, sha256: ${sha(TOKENS.viewer)}}
`);
  base = `http://127.0.0.1:${port}`;
  await startDaemon();
  browser = await chromium.launch({ executablePath, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
});

/** Stops the daemon (SIGTERM), runs `meanwhile`, and starts it again on the same data. */
async function restartDaemon(meanwhile) {
  daemon.kill("SIGTERM");
  await new Promise((r) => daemon.once("exit", r));
  await meanwhile();
  await startDaemon();
}

after(async () => {
  await browser?.close();
  if (daemon && daemon.exitCode === null) {
    daemon.kill("SIGTERM");
    await new Promise((r) => daemon.once("exit", r));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A fresh tab, with its page errors collected (a test fails on any). */
async function tab(t, { dark = false, bypassCSP = false } = {}) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, colorScheme: dark ? "dark" : "light", bypassCSP });
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    // A refused request is a console error by design in the forbidden/conflict cases.
    if (m.type() === "error" && !/status of (403|412)/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  t.after(async () => {
    // A failed test leaves a screenshot of where it stopped, and its page's problems.
    if (!t.passed) {
      await page.screenshot({ path: join(shots, `failed-${t.name.slice(0, 40).replace(/\W+/g, "-")}.png`), fullPage: true }).catch(() => {});
      if (problems.length) console.log(problems.join("\n"));
    }
    await context.close();
  });
  return { page, problems };
}

async function shot(page, name) {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

async function api(method, path, token, body) {
  const res = await fetch(`${base}/api/v1/fleets/portal${path}`, {
    method, headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: res.status === 204 ? null : await res.json() };
}

/** Creates (not starts) run `name` over the stored strategy "rings", to Kubernetes `version`. */
async function createRun(name, version) {
  const created = await api("PUT", `/updateRuns/${name}`, TOKENS.admin, {
    properties: { updateStrategyId: "/fleets/portal/updateStrategies/rings", managedClusterUpdate: { upgrade: { type: "Full", kubernetesVersion: version } } },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
}

test("an admin writes a strategy in the editor, sees its plan, starts a run, watches it, approves the gate and sees it Completed", async (t) => {
  const { page, problems } = await tab(t);
  await page.goto(`${base}/#token=${TOKENS.admin}`);
  await page.getByRole("heading", { name: "Update runs" }).waitFor();
  assert.equal(new URL(page.url()).hash, "", "the token leaves the address bar at once");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("waverun.token")), TOKENS.admin);
  await page.getByText("alice (admin)").waitFor();

  await page.getByRole("link", { name: "Editor" }).click();
  await page.getByLabel("Name").fill("rings");
  await page.getByLabel(/^Strategy/).fill(STRATEGY);
  await page.getByText("✓ valid").waitFor();
  const plan = page.locator("#plan");
  await plan.getByText("6 members to upgrade").waitFor();
  await plan.getByText("Gates needing a person: prod sign-off").waitFor();
  assert.match(await plan.innerText(), /dev-1, dev-2/);
  assert.match(await plan.innerText(), /prod-1, prod-2, prod-3, prod-4/);
  await page.getByText("Expected finish:").waitFor();
  assert.match(await page.locator("#sim-timeline").innerText(), /Completed, 6 upgraded, 0 failed/);
  await shot(page, "editor");
  await page.getByRole("button", { name: "Save strategy" }).click();
  await page.waitForURL(`${base}/strategies/rings`);
  const stored = await api("GET", "/updateStrategies/rings", TOKENS.admin);
  assert.equal(stored.status, 200);
  assert.deepEqual(stored.body.properties.strategy.stages.map((s) => s.name), ["dev", "prod"]);

  await page.getByRole("link", { name: "Runs" }).click();
  await page.getByLabel("Name").fill("r1");
  await page.getByLabel("Kubernetes version").fill("1.33.3");
  await page.getByLabel("Strategy", { exact: true }).selectOption("rings");
  await page.getByLabel("start it at once").check();
  await page.getByRole("button", { name: "Create run" }).click();
  await page.waitForURL(`${base}/runs/r1`);
  const tree = page.getByRole("list", { name: /stages, groups and members of r1/ });
  await tree.waitFor();
  // Members progress: dev's two upgrade, then the prod stage waits for its gate.
  await tree.locator("[data-row='Member:dev-1']").getByText("Completed").waitFor({ timeout: 60_000 });
  const approve = tree.getByRole("button", { name: "Approve" });
  await approve.waitFor({ timeout: 60_000 });
  assert.match(await tree.locator("[data-row='Stage:prod']").innerText(), /waiting/);
  // The forecast is simulated forward here, by the engine in this browser, from the daemon's
  // state: the expected finish in the header and the dashed bars beyond "now".
  // dev's two upgrades finished: the forecast takes their median as the time of prod's.
  await page.locator("dd", { hasText: /forecast simulated in this browser, upgrades of \d+ min: the median of the 2 upgrades this run finished/ })
    .waitFor({ timeout: 30_000 });
  await shot(page, "run-tree-waiting-for-gate");
  // The state is used only by the module that wrote it: with another module's digest, the
  // daemon's forecast is shown instead. A run gone since the page listed it is left out.
  const quiet = problems.length;
  const where = await page.evaluate(async () => {
    const m = await import("/assets/engine.js");
    const token = sessionStorage.getItem("waverun.token");
    /** @param {string} p */
    const get = async (p) => {
      const r = await fetch(`/api/v1/fleets/portal${p}`, { headers: { Authorization: `Bearer ${token}` } });
      if (!r.ok) throw Object.assign(new Error(`${r.status}`), { status: r.status });
      return { body: await r.json() };
    };
    /** @param {string} p */
    const foreign = async (p) => {
      const r = await get(p);
      if (p.endsWith("/forecastState")) r.body.module = "0".repeat(64);
      return r;
    };
    const here = await m.forecasts({ get }, ["gone", "r1"]);
    const there = await m.forecasts({ get: foreign }, ["r1", "gone"]);
    return { here: [...here].map(([n, f]) => [n, f.where]), there: [...there].map(([n, f]) => [n, f.where]) };
  });
  assert.deepEqual(where, { here: [["r1", "browser"]], there: [["r1", "daemon"]] });
  // The browser logs each 404 of "gone": those, and nothing else, were expected.
  const said = problems.splice(quiet);
  assert.ok(said.every((p) => /status of 404/.test(p)), said.join("\n"));
  await page.getByRole("tab", { name: "Timeline" }).click();
  await page.locator(".gantt svg rect.bar-forecast").first().waitFor();
  await shot(page, "run-timeline-forecast");
  await page.getByRole("tab", { name: "Tree" }).click();
  await page.getByRole("link", { name: /Approvals/ }).click();
  await page.getByRole("button", { name: /Approve prod sign-off of r1/ }).waitFor();
  await shot(page, "approvals");
  await page.goBack();
  await page.getByRole("list", { name: /members of r1/ }).getByRole("button", { name: "Approve" }).click();
  await page.locator("h1").getByText("Completed").waitFor({ timeout: 90_000 });
  await shot(page, "run-tree-completed");
  await page.getByRole("tab", { name: "Timeline" }).click();
  await page.locator(".gantt svg rect.bar-Completed").first().waitFor();
  assert.equal(await page.locator(".gantt svg rect.bar-Completed").count(), 6);
  await shot(page, "run-timeline");
  await page.getByRole("tab", { name: "Event log" }).click();
  await page.getByText(/GateCompleted\s+prod.*by alice/).waitFor();
  await shot(page, "run-events");

  const audit = await api("GET", "/audit?$top=1000", TOKENS.admin);
  const approval = audit.body.value.find((a) => a.action.startsWith("gates.") && a.who === "alice");
  assert.ok(approval, `the approval is in the audit log with who: ${JSON.stringify(audit.body.value.map((a) => a.action))}`);
  await page.getByRole("link", { name: "Audit" }).click();
  await page.getByRole("cell", { name: approval.action }).first().waitFor();
  await shot(page, "audit");
  await page.getByRole("link", { name: "Fleet" }).click();
  await page.getByText("6 of 6 members").waitFor();
  // The fleet shows what the members run now: the run's target.
  const fleetRows = page.getByRole("list", { name: "Members" }).locator(".vrow");
  await page.waitForFunction(() => [...document.querySelectorAll(".virtual .vrow")].filter((r) => /Kubernetes: 1\.33\.3/.test(r.textContent ?? "")).length === 6);
  assert.equal(await fleetRows.count(), 6);
  await page.getByLabel("Filter by label selector").fill("env in (prod");
  await page.locator("#selector-error").getByText(/selector/).waitFor();
  assert.equal(await page.getByLabel("Filter by label selector").getAttribute("aria-invalid"), "true");
  await page.getByLabel("Filter by label selector").fill("env in (prod), env!=dev");
  await page.getByText("4 of 6 members").waitFor();
  await shot(page, "fleet");
  assert.deepEqual(problems, []);
});

test("every page passes axe's WCAG 2 A and AA rules (contrast included) in light and dark, and works from the keyboard", async (t) => {
  const axe = join(root, "web/node_modules/axe-core/axe.min.js");
  for (const dark of [false, true]) {
    // axe is injected as a script, which the portal's CSP refuses: this context bypasses it.
    const { page, problems } = await tab(t, { dark, bypassCSP: true });
    await page.goto(`${base}/#token=${TOKENS.admin}`);
    for (const path of ["/fleet", "/runs", "/runs/r1", "/approvals", "/strategies", "/editor", "/simulate", "/profiles", "/webhooks", "/audit"]) {
      await page.goto(`${base}${path}`);
      await page.locator("main h1").first().waitFor();
      // The page's data arrives after its heading; the live stream never goes idle, so a short
      // settle rather than "network idle".
      await page.waitForTimeout(400);
      await page.addScriptTag({ path: axe });
      const violations = await page.evaluate(async () => {
        // @ts-ignore axe is the injected global
        const r = await window.axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } });
        return r.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join("; ")}`);
      });
      assert.deepEqual(violations, [], `${path} ${dark ? "dark" : "light"}`);
      // Every id a label or an ARIA attribute names exists on the page.
      const dangling = await page.evaluate(() => [...document.querySelectorAll("[aria-describedby], [aria-labelledby], [aria-controls], label[for]")]
        .flatMap((el) => ["aria-describedby", "aria-labelledby", "aria-controls", "for"]
          .flatMap((a) => (el.getAttribute(a) ?? "").split(/\s+/).filter(Boolean))
          .filter((id) => !document.getElementById(id))
          .map((id) => `${el.tagName.toLowerCase()} → #${id}`)));
      assert.deepEqual(dangling, [], `${path}: references to no element`);
      await shot(page, `page-${path.slice(1).replace(/\W+/g, "-")}-${dark ? "dark" : "light"}`);
    }
    assert.deepEqual(problems, []);
  }
  // The keyboard: the skip link comes first and lands in the page; the views of a run are tabs
  // that the arrow keys move between.
  const { page } = await tab(t);
  await page.goto(`${base}/runs/r1#token=${TOKENS.admin}`);
  await page.getByRole("tab", { name: "Tree" }).waitFor();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Skip to content");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "main");
  await page.getByRole("tab", { name: "Tree" }).focus();
  await page.keyboard.press("ArrowRight");
  assert.equal(await page.getByRole("tab", { name: "Timeline" }).getAttribute("aria-selected"), "true");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Timeline");
});

test("an invalid strategy shows the error at its field, with the CLI's path, and a way to its line", async (t) => {
  const { page, problems } = await tab(t, { dark: true });
  await page.goto(`${base}/editor#token=${TOKENS.admin}`);
  const text = page.getByLabel(/^Strategy/);
  await text.fill("stages:\n  - name: dev\n    groups:\n      - name: a\n        maxConcurrency: \"120%\"\n");
  const errors = page.locator("#strategy-errors");
  await errors.getByText('stages[0].groups[0].maxConcurrency').waitFor();
  assert.match(await errors.innerText(), /stages\[0\]\.groups\[0\]\.maxConcurrency: "120%" is above 100%/);
  assert.equal(await text.getAttribute("aria-invalid"), "true");
  await errors.getByRole("button", { name: "line 5" }).click();
  const selected = await text.evaluate((el) => el.value.slice(el.selectionStart, el.selectionEnd));
  assert.equal(selected, '        maxConcurrency: "120%"');
  await page.locator("#plan").getByText("The plan appears when the strategy is valid.").waitFor();
  // A typo in a key is named with a suggestion, as the CLI does.
  await text.fill("stages:\n  - name: dev\n    beforeGate: []\n");
  await errors.getByText(/beforeGate.*did you mean beforeGates/).waitFor();
  await shot(page, "editor-invalid-dark");
  assert.deepEqual(problems, []);
});

test("a viewer sees no action buttons, and a forbidden request says why", async (t) => {
  await createRun("r2", "1.33.3");
  const { page, problems } = await tab(t);
  await page.goto(`${base}/runs#token=${TOKENS.viewer}`);
  await page.getByText("victor (viewer)").waitFor();
  await page.getByRole("link", { name: "r2" }).waitFor();
  assert.equal(await page.getByRole("heading", { name: "Create a run" }).count(), 0);
  await page.getByRole("link", { name: "r2" }).click();
  await page.getByRole("list", { name: /members of r2/ }).waitFor();
  assert.equal(await page.getByRole("group", { name: "Run actions" }).getByRole("button").count(), 0);
  assert.equal(await page.getByRole("checkbox").count(), 0);
  await shot(page, "run-as-viewer");
  await page.getByRole("link", { name: "Editor" }).click();
  await page.getByText("✓ valid").waitFor();
  assert.equal(await page.getByRole("button", { name: /Save/ }).count(), 0);

  // The same tab signed in as admin shows the buttons; when the token in it is a viewer's by
  // the time the button is pressed, the API refuses (403) and the page says why.
  await page.goto(`${base}/runs/r2#token=${TOKENS.admin}`);
  const start = page.getByRole("group", { name: "Run actions" }).getByRole("button", { name: "Start" });
  await start.waitFor();
  await page.evaluate((t) => sessionStorage.setItem("waverun.token", t), TOKENS.viewer);
  await start.click();
  const alert = page.getByRole("alert");
  await alert.waitFor();
  assert.match(await alert.innerText(), /Start was refused\. Not allowed \(403\): token "victor" has role Viewer, which may not do this \(it needs operator or admin\)/);
  await shot(page, "forbidden");
  const after = await api("GET", "/updateRuns/r2", TOKENS.admin);
  assert.equal(after.body.properties.status?.status?.state ?? "NotStarted", "NotStarted");
  assert.deepEqual(problems, []);
});

test("a conflicting change is refused with If-Match and the page reloads the run", async (t) => {
  const { page, problems } = await tab(t);
  await page.goto(`${base}/runs/r2#token=${TOKENS.admin}`);
  const start = page.getByRole("group", { name: "Run actions" }).getByRole("button", { name: "Start" });
  await start.waitFor();
  // Someone else changes the run behind the page's back (its ETag changes).
  const current = await api("GET", "/updateRuns/r2", TOKENS.admin);
  const changed = await fetch(`${base}/api/v1/fleets/portal/updateRuns/r2`, {
    method: "PUT",
    headers: { Authorization: `Bearer ${TOKENS.admin}`, "Content-Type": "application/json", "If-Match": current.body.eTag },
    body: JSON.stringify({ properties: { updateStrategyId: "/fleets/portal/updateStrategies/rings", managedClusterUpdate: { upgrade: { type: "ControlPlaneOnly", kubernetesVersion: "1.33.3" } } } }),
  });
  assert.equal(changed.status, 200, await changed.text());
  await start.click();
  const alert = page.getByRole("alert");
  await alert.waitFor();
  assert.match(await alert.innerText(), /Start was refused\. It changed since this page read it \(its ETag no longer matches\)\. The run has been read again/);
  await page.getByText("ControlPlaneOnly → Kubernetes 1.33.3").waitFor();
  await shot(page, "conflict");
  assert.deepEqual(problems, []);
});

test("the in-browser simulation of a scenario is byte for byte `waverun simulate -o json`", async (t) => {
  const { page, problems } = await tab(t);
  await page.goto(`${base}/simulate#token=${TOKENS.admin}`);
  for (const file of ["host/examples/fleet-rollout.yaml", "tests/scenarios/gates-and-wait.yaml", "tests/scenarios/profiles/patches.yaml"]) {
    const expected = execFileSync(bin, ["simulate", "-o", "json", join(root, file)], { encoding: "utf8", maxBuffer: 64 << 20 });
    await page.getByLabel("Scenario (YAML or JSON)").fill(readFileSync(join(root, file), "utf8"));
    await page.evaluate(() => { document.getElementById("report").textContent = ""; });
    await page.getByRole("button", { name: "Simulate" }).click();
    await page.waitForFunction(() => (document.getElementById("report")?.textContent ?? "").length > 0);
    const inBrowser = await page.locator("#report").evaluate((el) => el.textContent);
    assert.equal(inBrowser, expected, file);
    if (file.startsWith("host/")) await shot(page, "simulate");
  }
  // A scenario with an error names the field, as the CLI does.
  await page.getByLabel("Scenario (YAML or JSON)").fill("start: 2026-12-07T00:00:00Z\nmembers:\n  - {name: a, region: eastus, kubernetesVersion: 1.30.4, nodePools: [{name: p, imageVersion: bad}]}\nrun: {name: r, managedClusterUpdate: {upgrade: {type: Full, kubernetesVersion: 1.31.2}}}\n");
  await page.getByRole("button", { name: "Simulate" }).click();
  await page.locator("#scenario-error").getByText("members[0].nodePools[0].osType: is required (line 3, column 80)").waitFor();
  assert.deepEqual(problems, []);
});

test("members picked in the tree are skipped, and a retry run takes the ones left over", async (t) => {
  // r1 took every member to 1.33.3; r3 takes them to the next patch.
  await createRun("r3", "1.33.4");
  const { page, problems } = await tab(t);
  await page.goto(`${base}/runs/r3#token=${TOKENS.admin}`);
  const tree = page.getByRole("list", { name: /members of r3/ });
  await tree.waitFor();
  await page.getByRole("button", { name: "Start" }).click();
  // While the prod stage waits for its gate, two of its members are picked and skipped.
  const approve = tree.getByRole("button", { name: "Approve" });
  await approve.waitFor({ timeout: 60_000 });
  await page.getByRole("checkbox", { name: "select Member:prod-4 to skip" }).check();
  await page.getByRole("checkbox", { name: "select Member:prod-3 to skip" }).check();
  await page.getByRole("button", { name: "Skip 2 selected" }).click();
  await page.getByRole("status").getByText("Skip: done.").waitFor();
  await tree.locator("[data-row='Member:prod-4'] .badge").getByText("Skipped", { exact: true }).waitFor();
  await tree.locator("[data-row='Member:prod-3'] .badge").getByText("Skipped", { exact: true }).waitFor();
  await shot(page, "run-skipped");
  await approve.click();
  await page.locator("h1").getByText("Completed").waitFor({ timeout: 90_000 });
  await page.getByRole("button", { name: "Retry" }).click();
  await page.waitForURL(`${base}/runs/r3-retry`);
  const retry = page.getByRole("list", { name: /members of r3-retry/ });
  await retry.waitFor();
  const rows = await retry.locator("[data-row^='Member:']").evaluateAll((els) => els.map((e) => e.getAttribute("data-row")));
  assert.deepEqual(rows.sort(), ["Member:prod-3", "Member:prod-4"]);
  assert.deepEqual(problems, []);
});

test("live updates resume after the daemon restarts, without a gap or a duplicate", async (t) => {
  // prod-3 and prod-4, skipped in r3, are still on 1.33.3: r4 has work for its prod stage.
  await createRun("r4", "1.33.4");
  const { page, problems } = await tab(t);
  await page.goto(`${base}/runs/r4#token=${TOKENS.admin}`);
  await page.getByRole("tab", { name: "Event log" }).click();
  await page.getByText("● live").waitFor();
  await restartDaemon(async () => {
    await page.getByText("○ reconnecting…").waitFor({ timeout: 30_000 });
  });
  await page.getByText("● live").waitFor({ timeout: 60_000 });
  const started = await fetch(`${base}/api/v1/fleets/portal/updateRuns/r4/start`, { method: "POST", headers: { Authorization: `Bearer ${TOKENS.admin}` } });
  assert.equal(started.status, 200, await started.text());
  const log = page.getByRole("list", { name: "Events of r4" });
  await log.getByText(/GateCreated/).waitFor({ timeout: 60_000 });
  const apiKinds = async () => (await api("GET", "/events?run=r4&$top=1000", TOKENS.admin)).body.value.map((e) => e.kind);
  let want = await apiKinds();
  for (let i = 0; i < 50; i++) {
    const shown = await log.locator(".vrow code").evaluateAll((els) => els.map((e) => e.textContent.trim().split(/\s+/)[2]));
    want = await apiKinds();
    if (shown.length === want.length) {
      assert.deepEqual(shown, want);
      break;
    }
    await page.waitForTimeout(200);
  }
  assert.equal((await log.locator(".vrow code").count()), want.length);
  assert.equal(want.filter((k) => k === "RunStarted").length, 1);
  // While the daemon was down, the stream's reconnection attempts were refused: expected.
  assert.deepEqual(problems.filter((p) => !p.includes("net::ERR_CONNECTION_REFUSED")), []);
});

test("a health gate found inconclusive shows its check, and a person fails it with a reason", async (t) => {
  // A receiver on loopback: each member's smoke check passes; the gate's check cannot tell.
  const asked = [];
  const receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => { body += d; });
    req.on("end", () => {
      asked.push({ path: req.url, body: JSON.parse(body || "{}") });
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(req.url === "/gate" ? JSON.stringify({ result: "inconclusive", message: "no traffic yet" }) : "{}");
    });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => receiver.close(r)));
  const url = (path) => `http://127.0.0.1:${receiver.address().port}${path}`;

  const { page, problems } = await tab(t);
  // The editor validates checks in the browser, as the CLI does.
  await page.goto(`${base}/editor#token=${TOKENS.admin}`);
  const text = page.getByLabel(/^Strategy/);
  await text.fill(`healthChecks:\n  - {name: slo, prometheus: {query: up, successCondition: "result <> 1"}}\nstages:\n  - name: dev\n    afterGates: [{type: HealthCheck, healthCheck: slow}]\n`);
  const errors = page.locator("#strategy-errors");
  await errors.getByText("healthChecks[0].prometheus.successCondition").waitFor();
  await errors.getByText("stages[0].afterGates[0].healthCheck").waitFor();
  await shot(page, "editor-invalid-check");

  const strategy = {
    healthChecks: [
      { name: "smoke", http: { url: url("/smoke/{{member}}") } },
      { name: "slo", http: { url: url("/gate") } },
    ],
    stages: [{
      name: "dev", memberSelector: { byLabel: "env=dev" },
      afterMemberChecks: { soakSeconds: 60, checks: ["smoke"] },
      afterGates: [{ type: "HealthCheck", healthCheck: "slo", displayName: "dev healthy" }],
    }],
  };
  const put = await api("PUT", "/updateStrategies/checked", TOKENS.admin, { properties: { strategy } });
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const created = await api("PUT", "/updateRuns/r5", TOKENS.admin, {
    properties: { updateStrategyId: "/fleets/portal/updateStrategies/checked", managedClusterUpdate: { upgrade: { type: "Full", kubernetesVersion: "1.33.5" } } },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  await page.goto(`${base}/runs/r5`);
  const tree = page.getByRole("list", { name: /members of r5/ });
  await tree.waitFor();
  await page.getByRole("button", { name: "Start" }).click();

  // Each member shows its check; the gate shows the inconclusive measurement, Approve and Fail.
  const gate = tree.locator(".node", { hasText: "dev healthy" });
  await gate.getByRole("button", { name: "Fail" }).waitFor({ timeout: 60_000 });
  await gate.getByRole("button", { name: "Approve" }).waitFor();
  assert.match(await gate.innerText(), /check slo: 1 of 1 measured, last Inconclusive/);
  for (const m of ["dev-1", "dev-2"]) {
    assert.match(await tree.locator(`[data-row='Member:${m}']`).innerText(), /check smoke: 1 of 1 measured, last Pass → Pass/);
  }
  assert.match(await tree.locator("[data-row='Stage:dev']").innerText(), /"slo" was inconclusive: approve or fail it/);
  await shot(page, "run-health-gate");
  // The timeline marks each soak and check.
  await page.getByRole("tab", { name: "Timeline" }).click();
  await page.locator(".gantt svg line.mark").first().waitFor({ state: "attached" });
  const marks = await page.locator(".gantt svg line.mark title").allTextContents();
  assert.ok(marks.some((m) => /check smoke \(soak until .*\) \S*dev-1$/.test(m)), marks.join("\n"));
  assert.ok(marks.some((m) => /check smoke Pass \S*dev-2$/.test(m)), marks.join("\n"));
  await shot(page, "run-health-timeline");
  await page.getByRole("tab", { name: "Tree" }).click();
  // The receiver was told what it checks.
  const gateAsk = asked.find((a) => a.path === "/gate");
  assert.equal(gateAsk.body.run, "r5", JSON.stringify(gateAsk));
  assert.deepEqual(asked.filter((a) => a.path.startsWith("/smoke/")).map((a) => a.path).sort(), ["/smoke/dev-1", "/smoke/dev-2"]);

  // Failed by a person, with a reason: the run stops on HealthCheckFailed, saying why.
  page.once("dialog", (d) => void d.accept("error budget burnt"));
  await gate.getByRole("button", { name: "Fail" }).click();
  await page.locator("h1").getByText("Failed").waitFor({ timeout: 60_000 });
  const run = await api("GET", "/updateRuns/r5", TOKENS.admin);
  const status = run.body.properties.status;
  assert.equal(status.status.state, "Failed", JSON.stringify(status.status));
  assert.match(JSON.stringify(status), /error budget burnt/);
  await shot(page, "run-health-gate-failed");
  assert.deepEqual(problems, []);
});

test("an admin creates an event subscription, sees its secret once, sends a test event; a viewer is told it is an admin's", async (t) => {
  // A receiver on loopback that takes every POST (the signatures are checked by the Rust tests'
  // receiver, with PyPI's standardwebhooks).
  const got = [];
  const receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => { body += d; });
    req.on("end", () => { got.push({ headers: req.headers, body }); res.writeHead(204).end(); });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  t.after(() => receiver.close());
  const url = `http://127.0.0.1:${receiver.address().port}/hooks`;

  const { page, problems } = await tab(t);
  await page.goto(`${base}/webhooks#token=${TOKENS.admin}`);
  await page.getByRole("heading", { name: "Event subscriptions" }).waitFor();
  await page.getByText("No event subscriptions yet.").waitFor();
  await page.getByLabel("Name").fill("pager");
  await page.getByLabel("Endpoint URL").fill(url);
  await page.getByLabel("Event types").fill("GateCreated RunFailed");
  await page.getByRole("button", { name: "Create" }).click();
  const secret = await page.locator("#sub-secret").innerText();
  assert.match(secret, /^whsec_[A-Za-z0-9+/=]+$/);
  await page.getByRole("cell", { name: "GateCreated, RunFailed" }).waitFor();
  await shot(page, "webhooks");
  // Never again: not in what the API reads back.
  const read = await api("GET", "/eventSubscriptions/pager", TOKENS.admin);
  assert.equal(read.status, 200);
  assert.ok(!JSON.stringify(read.body).includes(secret.slice(6)));

  await page.getByRole("button", { name: "Send a test event to pager" }).click();
  await page.getByText(/pager: the test event was delivered \(204, \d+ ms\)/).waitFor();
  assert.equal(got.length, 1);
  assert.equal(JSON.parse(got[0].body).type, "io.waverun.Test");
  assert.match(got[0].headers["webhook-signature"], /^v1,/);

  const viewer = await tab(t);
  await viewer.page.goto(`${base}/webhooks#token=${TOKENS.viewer}`);
  await viewer.page.getByText(/Event subscriptions are an admin's: this token is viewer/).waitFor();
  assert.deepEqual(problems, []);
  assert.deepEqual(viewer.problems, []);
  assert.equal((await api("DELETE", "/eventSubscriptions/pager", TOKENS.admin)).status, 204);
});
