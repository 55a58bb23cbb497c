// Shared by the browser tests (web/test/): what each needs to start a daemon of its own. Kept
// out of web/test/, where node --test would take it for a test file.

import { createServer } from "node:net";

/** A TCP port free on 127.0.0.1 now (the daemon is told to listen on it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
