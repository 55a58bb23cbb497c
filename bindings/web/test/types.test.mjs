// The TypeScript declarations: they type-check under `tsc --strict` with a usage file that
// exercises every export (and whose `@ts-expect-error` lines prove the types are precise), the
// README's `ts` examples compile, and no `any` appears in the generated declarations.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pkgNodeDir, pkgWebDir, webDir } from "../testing/support.mjs";

test("the declarations type-check under tsc --strict, with the README's ts examples", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "waverun-tsc-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const readme = readFileSync(join(webDir, "README.md"), "utf8");
  const examples = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  assert.ok(examples.length >= 1, "the README has a ts example");
  const types = join(webDir, "testing/types");
  const files = [join(types, "usage.ts"), join(types, "usage-web.ts")];
  examples.forEach((code, i) => {
    files.push(join(dir, `readme-${i + 1}.ts`));
    writeFileSync(files.at(-1), code);
  });
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ extends: join(types, "tsconfig.json"), files }));
  const tsc = join(webDir, "node_modules/.bin/tsc");
  try {
    execFileSync(tsc, ["-p", join(dir, "tsconfig.json")], { encoding: "utf8" });
  } catch (e) {
    assert.fail(`tsc --strict failed:\n${e.stdout}${e.stderr}`);
  }
});

test("no `any` in the generated declarations", () => {
  const offending = [];
  for (const dir of [pkgNodeDir, pkgWebDir]) {
    for (const f of readdirSync(dir).filter((f) => f.endsWith(".d.ts"))) {
      const code = readFileSync(join(dir, f), "utf8")
        .replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, " ")) // comments, keeping line numbers
        .replace(/\/\/.*$/gm, "");
      code.split("\n").forEach((line, i) => {
        if (/\bany\b/.test(line)) offending.push(`${join(dir, f)}:${i + 1}: ${line.trim()}`);
      });
    }
  }
  assert.deepEqual(offending, []);
});

test("every export is declared with the types it takes and gives", () => {
  const dts = readFileSync(join(pkgNodeDir, "waverun_wasm.d.ts"), "utf8");
  for (const signature of [
    "export function validateStrategy(strategy: UpdateStrategy): void;",
    "export function validateMember(member: Member): void;",
    "export function validateRun(run: UpdateRunSpec): void;",
    "export function validateScenario(scenario: Scenario): void;",
    "export function plan(scenario: Scenario): ScenarioPlan;",
    "export function simulate(scenario: Scenario): SimulationReport;",
    "export function isWaverunError(value: unknown): value is WaverunError;",
    "constructor(nowIso: string);",
    "handleInput(nowIso: string, input: Input): void;",
    "command(nowIso: string, command: Command): void;",
    "observe(nowIso: string, observation: Observation): void;",
    "timeout(nowIso: string): void;",
    "drainOutputs(): Output[];",
    "nextWakeup(): Wakeup | undefined;",
    "status(run: string): RunStatus;",
    "plan(run: string): Plan;",
    "snapshot(): string;",
    "static restore(snapshot: string): WaverunEngine;",
    "readonly now: string;",
  ]) {
    assert.ok(dts.includes(signature), `missing: ${signature}`);
  }
});
