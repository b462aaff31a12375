// The runtime's health server reads any manager through HealthSource: its watched caches' progress,
// whether every cache synced, and its metrics registry (src/runtime/health.ts).
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { startControllerHealthServer, type HealthSource } from "../../src/runtime/health.js";

let close: (() => void) | undefined;
afterEach(() => close?.());

async function serve(source: HealthSource) {
  const { server, url } = await startControllerHealthServer(source, "127.0.0.1", 0);
  close = () => server.close();
  return async (path: string) => (await fetch(url + path)).status;
}

describe("the controller's health server", () => {
  it("is unhealthy once a synced cache made no progress for 5 minutes, and ready once every cache synced", async () => {
    const cache = { hasSynced: true, lastActivityAt: Date.now() };
    const source = { watched: [cache], synced: false, metrics: { registry: new Registry() } };
    const status = await serve(source);
    expect(await status("/healthz")).toBe(200);
    expect(await status("/readyz")).toBe(503);
    source.synced = true;
    expect(await status("/readyz")).toBe(200);
    cache.lastActivityAt = Date.now() - 6 * 60_000;
    expect(await status("/healthz")).toBe(500);
    expect(await status("/metrics")).toBe(200);
  });
});
