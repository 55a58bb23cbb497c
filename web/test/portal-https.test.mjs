// The portal over HTTPS: a real `waverun serve` with `tls:` (a certificate signed by a test CA
// made here with openssl) and Debian's Chromium, which trusts exactly that server key
// (`--ignore-certificate-errors-spki-list`, the key's SPKI hash: no other certificate error is
// ignored). The page signs in, lists the fleet, opens the live event stream and writes over TLS.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync, execSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { freePort } from "../harness.mjs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const bin = process.env.WAVERUN_BIN ?? join(root, "target/debug/waverun");
const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const TOKEN = "portal-https-admin-token-0123456789";
const sha = (t) => createHash("sha256").update(t).digest("hex");

let dir, daemon, base, browser, ca;
const logs = [];

/** GET over https trusting only the test CA: the status, or 0 when nothing answered. */
function get(url) {
  return new Promise((resolve) => {
    const req = request(url, { ca, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on("error", () => resolve(0));
    req.on("timeout", () => { req.destroy(); resolve(0); });
    req.end();
  });
}

before(async () => {
  if (!existsSync(executablePath)) throw new Error(`Chromium is not installed at ${executablePath}`);
  dir = mkdtempSync(join(tmpdir(), "waverun-portal-https-"));
  const ssl = (args) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  ssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
    "-out", "ca.pem", "-days", "2", "-subj", "/CN=waverun portal test CA"]);
  writeFileSync(join(dir, "server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  ssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
    "-out", "server.csr", "-subj", "/CN=127.0.0.1"]);
  ssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
    "-out", "server.pem", "-days", "2", "-extfile", "server.ext"]);
  ca = readFileSync(join(dir, "ca.pem"));
  // The server key's SPKI hash: the one key Chromium is told to accept.
  const spki = execSync(
    "openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
    { cwd: dir },
  ).toString().trim();
  const port = await freePort();
  writeFileSync(join(dir, "fleet.yaml"), `start: 2026-12-07T00:00:00Z
members:
  - {name: dev-1, region: eastus, kubernetesVersion: 1.32.7, nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202611.01.0}]}
  - {name: prod-1, region: eastus, kubernetesVersion: 1.32.7, nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202611.01.0}]}
releases:
  kubernetes:
    - {version: 1.32.7, available: {eastus: 2026-11-01T00:00:00Z}}
`);
  writeFileSync(join(dir, "waverun.yaml"), `listen: 127.0.0.1:${port}
dataDir: data
fleet: secure
fleetFile: fleet.yaml
tls: {certFile: server.pem, keyFile: server.key}
tokens:
  - {name: alice, role: admin, sha256: ${sha(TOKEN)}}
`);
  base = `https://127.0.0.1:${port}`;
  daemon = spawn(bin, ["serve", "--config", join(dir, "waverun.yaml")], { stdio: ["ignore", "pipe", "pipe"] });
  daemon.stdout.on("data", (d) => logs.push(String(d)));
  daemon.stderr.on("data", (d) => logs.push(String(d)));
  let ready = false;
  for (let i = 0; i < 600 && !ready; i++) {
    if (daemon.exitCode !== null) throw new Error(`the daemon exited: ${logs.join("")}`);
    ready = (await get(`${base}/readyz`)) === 200;
    if (!ready) await new Promise((r) => setTimeout(r, 100));
  }
  if (!ready) throw new Error(`the daemon was not ready within 60 s: ${logs.join("")}`);
  assert.match(logs.join(""), new RegExp(`serving fleet "secure" on https://127\\.0\\.0\\.1:${port}`));
  browser = await chromium.launch({ executablePath, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    `--ignore-certificate-errors-spki-list=${spki}`] });
});

after(async () => {
  await browser?.close();
  if (daemon && daemon.exitCode === null) {
    daemon.kill("SIGTERM");
    await new Promise((r) => daemon.once("exit", r));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the portal signs in, lists the fleet, opens the live stream and writes over https", async () => {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  // The portal's live event stream, over TLS.
  const stream = page.waitForResponse((r) => r.url().includes("/events") && r.request().headers().accept === "text/event-stream");
  const response = await page.goto(`${base}/fleet#token=${TOKEN}`);
  assert.equal(response.status(), 200);
  assert.match((await response.securityDetails())?.protocol ?? "", /^TLS/, "served over TLS");
  await page.getByText("alice (admin)").waitFor();
  const rows = page.getByRole("list", { name: "Members" }).locator(".vrow");
  await rows.filter({ hasText: "prod-1" }).waitFor();
  assert.equal((await stream).status(), 200);
  // Node's own fetch does not trust the test CA: the certificate is really checked.
  const strategy = { properties: { strategy: { stages: [{ name: "all", groups: [{ name: "g" }] }] } } };
  const put = await fetch(`${base}/api/v1/fleets/secure/updateStrategies/s`, { method: "PUT" }).catch((e) => e);
  assert.ok(put instanceof Error, "Node's fetch does not trust the test CA: https is really checked");
  await page.evaluate(async ([token, body]) => {
    const r = await fetch("/api/v1/fleets/secure/updateStrategies/s", {
      method: "PUT", headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    if (r.status !== 201) throw new Error(`PUT: ${r.status}`);
  }, [TOKEN, strategy]);
  await page.getByRole("link", { name: "Strategies" }).click();
  await page.getByRole("link", { name: "s", exact: true }).waitFor();
  assert.deepEqual(problems, []);
  await context.close();
});
