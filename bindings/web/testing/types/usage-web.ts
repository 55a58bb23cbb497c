// The browser package's entry points, type-checked with usage.ts.
import init, { initSync, simulate } from "waverun-wasm/web";
import type { InitOutput, Scenario, State } from "waverun-wasm/web";

export async function finalState(wasmUrl: URL, scenario: Scenario): Promise<State> {
  const exports: InitOutput = await init({ module_or_path: wasmUrl });
  exports.memory.buffer;
  return simulate(scenario).summary.state;
}

export function loadSync(bytes: ArrayBuffer): InitOutput {
  return initSync({ module: bytes });
}
