// A 10,000-member run in the portal: how long its pages take to show and how long a scroll step
// of its virtualised views takes, in headless Chromium against a real daemon. A benchmark, not a
// test: it prints figures and asserts nothing about time.
//
//   node web/bench/portal-10k.mjs [--members N] [--bin target/release/waverun]
//
// The fleet: N clusters in 20 rings (labels ring=r0..r19), one region; the strategy: 20 stages of
// 5 groups; the run created and started at a fleet clock of 1× (it barely moves while measured).

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const N = Number(arg("--members", "10000"));
const bin = arg("--bin", existsSync(join(root, "target/release/waverun")) ? join(root, "target/release/waverun") : join(root, "target/debug/waverun"));
const TOKEN = "bench-admin";

const port = await new Promise((resolve) => {
  const s = createServer();
  s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});
const dir = mkdtempSync(join(tmpdir(), "waverun-portal-bench-"));
const members = [];
for (let i = 0; i < N; i++) {
  const name = `m${String(i).padStart(5, "0")}`;
  members.push(`  - {name: ${name}, labels: {ring: r${i % 20}, zone: z${Math.floor(i / 20) % 5}}, region: eastus, kubernetesVersion: 1.32.7, `
    + `nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202611.01.0}], `
    + `maintenance: {kubernetes: {schedule: {daily: {intervalDays: 1}}, durationHours: 8, startTime: "22:00", utcOffset: "+00:00"}}}`);
}
writeFileSync(join(dir, "fleet.yaml"), `start: 2026-12-07T00:00:00Z
members:
${members.join("\n")}
releases:
  kubernetes:
    - {version: 1.32.7, available: {eastus: 2026-11-01T00:00:00Z}}
    - {version: 1.33.3, available: {eastus: 2026-12-01T00:00:00Z}}
  nodeImages:
    - {version: AKSUbuntu-2204gen2containerd-202611.01.0, available: {eastus: 2026-11-01T00:00:00Z}}
`);
writeFileSync(join(dir, "waverun.yaml"), `listen: 127.0.0.1:${port}
dataDir: data
fleet: bench
timeScale: 1
fleetFile: fleet.yaml
tokens:
  - {name: bench, role: admin, sha256: ${createHash("sha256").update(TOKEN).digest("hex")}}
`);

const t0 = Date.now();
const daemon = spawn(bin, ["serve", "--config", join(dir, "waverun.yaml")], { stdio: ["ignore", "ignore", "inherit"] });
const base = `http://127.0.0.1:${port}`;
for (let i = 0; i < 3000; i++) {
  try { if ((await fetch(`${base}/readyz`)).ok) break; } catch { /* starting */ }
  await new Promise((r) => setTimeout(r, 100));
}
const figures = { members: N, binary: bin.replace(`${root}/`, ""), daemonReadyMs: Date.now() - t0 };
const api = async (method, path, body) => {
  const r = await fetch(`${base}/api/v1/fleets/bench${path}`, { method, headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" }, body: body && JSON.stringify(body) });
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return r.json();
};
const stages = Array.from({ length: 20 }, (_, s) => ({
  name: `ring-${s}`,
  groups: Array.from({ length: 5 }, (_, g) => ({ name: `r${s}-z${g}`, memberSelector: { byLabel: `ring=r${s},zone=z${g}` }, maxConcurrency: "10%" })),
}));
await api("PUT", "/updateStrategies/rings", { properties: { strategy: { stages } } });
await api("PUT", "/updateRuns/big", { properties: { updateStrategyId: "/fleets/bench/updateStrategies/rings", managedClusterUpdate: { upgrade: { type: "Full", kubernetesVersion: "1.33.3" } } } });
await api("POST", "/updateRuns/big/start", {});

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: ["--headless", "--no-sandbox", "--disable-gpu"] });
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
await page.goto(`${base}/#token=${TOKEN}`);
await page.getByRole("heading", { name: "Update runs" }).waitFor({ timeout: 120_000 });

/** Scrolls `selector` through its height in 40 steps, two frames each: per-step times in ms, and
 * how many rows are in the DOM at the end (list rows, or the timeline's row labels). */
const scroll = (selector) => page.evaluate(async (sel) => {
  const el = document.querySelector(sel);
  const times = [];
  for (let i = 1; i <= 40; i++) {
    const t = performance.now();
    el.scrollTop = (el.scrollHeight * i) / 40;
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { p50: +times[20].toFixed(1), max: +times[39].toFixed(1), rowsInDom: el.querySelectorAll(".vrow").length || el.querySelectorAll("svg:not(.axis-svg) text").length };
}, selector);

let t = Date.now();
await page.goto(`${base}/runs/big`);
await page.locator(".virtual .vrow").first().waitFor({ timeout: 120_000 });
figures.runTreeFirstRowsMs = Date.now() - t;
await page.locator("dd", { hasText: "forecast simulated in this browser" }).waitFor({ timeout: 120_000 });
figures.runForecastInBrowserMs = Date.now() - t;
// What that forecast costs: the state read from the daemon, and the daemon's own forecast.
{
  const headers = { Authorization: `Bearer ${TOKEN}` };
  let t1 = Date.now();
  const state = await (await fetch(`${base}/api/v1/fleets/bench/updateRuns/big/forecastState`, { headers })).text();
  figures.forecastStateReadMs = Date.now() - t1;
  figures.forecastStateBytes = state.length;
  t1 = Date.now();
  await (await fetch(`${base}/api/v1/fleets/bench/updateRuns/big/forecast`, { headers })).text();
  figures.daemonForecastMs = Date.now() - t1;
  t1 = Date.now();
  await page.evaluate(async (st) => {
    const m = await import("/assets/engine.js");
    const { snapshot, at } = JSON.parse(st);
    await m.request({ type: "forecastFrom", run: "big", snapshot, at });
  }, state);
  figures.browserForecastFromMs = Date.now() - t1;
}
figures.runTreeScroll = await scroll(".virtual");
t = Date.now();
await page.getByRole("tab", { name: "Timeline" }).click();
await page.locator(".gantt svg text").first().waitFor({ timeout: 120_000 });
figures.timelineMs = Date.now() - t;
// The maintenance windows shaded once the members are read (drawn again).
await page.locator(".gantt rect.shade").first().waitFor({ timeout: 300_000 });
figures.timelineShadedMs = Date.now() - t;
figures.timelineScroll = await scroll(".gantt");

t = Date.now();
await page.goto(`${base}/fleet`);
await page.locator(".virtual .vrow").first().waitFor({ timeout: 120_000 });
figures.fleetFirstRowsMs = Date.now() - t;
await page.getByText(`${N} of ${N} members`).waitFor({ timeout: 300_000 });
figures.fleetMs = Date.now() - t;
t = Date.now();
await page.getByLabel("Filter by label selector").fill("ring in (r1, r2), zone!=z0");
await page.waitForFunction((n) => [...document.querySelectorAll("p.hint")]
  .some((p) => /^\d+ of \d+ members$/.test(p.textContent ?? "") && !(p.textContent ?? "").startsWith(`${n} of`)), N, { timeout: 60_000 });
figures.fleetSelectorMs = Date.now() - t;
figures.fleetScroll = await scroll(".virtual");

t = Date.now();
await page.goto(`${base}/strategies/rings`);
await page.getByText("Expected finish:").waitFor({ timeout: 300_000 });
figures.editorPlanAndSimulateMs = Date.now() - t;

console.log(JSON.stringify(figures, null, 2));
await browser.close();
daemon.kill("SIGTERM");
await new Promise((r) => daemon.once("exit", r));
rmSync(dir, { recursive: true, force: true });
