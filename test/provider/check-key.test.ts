// `kubectl media check-key` keeps the runbook's GraphQL check and says which API answered; once
// GraphQL is retired it checks the key over REST v2 instead. Run in-process against the simulator.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

const KEY = "rp_CHECKKEY_1a2b3c4d5e";
let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ apiKeys: [KEY], endpoints: [{ name: "media-asr-dev" }] });
});
afterAll(() => sim.close());

async function checkKey(args: string[] = [], key = KEY): Promise<{ code: number; out: string }> {
  let out = "";
  const sink = { write: (t: string) => (out += t) };
  const code = await main(
    ["check-key", ...args],
    { GPU_PROVIDER_API_KEY: key, GPU_PROVIDER_API_URL: sim.url, PATH: process.env.PATH },
    { stdout: sink, stderr: sink },
  );
  expect(out).not.toContain(key);
  return { code, out };
}

describe("check-key", () => {
  it("checks over GraphQL while it is there, naming the account", async () => {
    sim.setFaults({});
    const r = await checkKey();
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/valid \(account user_\w+\), checked over GraphQL\n/);
  });

  it("falls back to REST v2 when GraphQL is retired, and says so", async () => {
    sim.setFaults({ graphqlRetired: true });
    const r = await checkKey();
    expect(r.code).toBe(0);
    expect(r.out).toContain("GPU provider API key: valid");
    expect(r.out).toContain("checked over REST v2, as GraphQL is unavailable");
    expect(r.out).toContain("HTTP 410");
    const json = await checkKey(["-o", "json"]);
    expect(JSON.parse(json.out)).toMatchObject({ result: "valid", api: "rest", apiUrl: sim.url });
  });

  it("a wrong key is invalid on either API", async () => {
    for (const faults of [{}, { graphqlRetired: true }]) {
      sim.setFaults(faults);
      const r = await checkKey([], "rp_WRONG_key_zz");
      expect(r.code).toBe(1);
      expect(r.out).toContain("GPU provider API key: INVALID");
    }
  });
});
