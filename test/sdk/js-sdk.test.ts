// RunPod's official JavaScript SDK (npm `runpod-sdk`) drives the simulator's job API exactly as it
// drives RunPod's: only its base URL points at the simulator.
import runpodSdk from "runpod-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

const KEY = "rp_JSSDK_1234abcd";
let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({
    apiKeys: [KEY],
    timeScale: 0.01,
    endpoints: [
      { id: "ep-tts-js", name: "media-tts-js", workload: "tts", workersMax: 2 },
      { id: "ep-idle-js", name: "media-render-idle", workload: "render", workersMax: 0 },
    ],
  });
});
afterAll(() => sim?.close());

const sdk = (key = KEY) => runpodSdk(key, { baseUrl: `${sim.url}/v2` });

describe("RunPod's JavaScript SDK against the simulator", () => {
  it("run, then status until COMPLETED with the output", async () => {
    const ep = sdk().endpoint("ep-tts-js")!;
    const submitted = await ep.run({ input: { text: "hello" } });
    expect(submitted).toMatchObject({ id: expect.any(String), status: "IN_QUEUE" });
    let status = await ep.status(submitted.id);
    for (let i = 0; i < 200 && status.status !== "COMPLETED"; i++) {
      await new Promise((r) => setTimeout(r, 20));
      status = await ep.status(submitted.id);
    }
    expect(status).toMatchObject({ id: submitted.id, status: "COMPLETED", started: true, completed: true });
    expect((status as { output?: unknown }).output).toBeDefined();
  });

  it("runSync answers the finished job (runsync, then status-sync while it runs)", async () => {
    const result = await sdk()
      .endpoint("ep-tts-js")!
      .runSync({ input: { text: "hello, synchronously" } });
    expect(result).toMatchObject({ status: "COMPLETED", completed: true, succeeded: true });
    expect((result as { output?: unknown }).output).toBeDefined();
  });

  it("statusSync waits for a queued job to end", async () => {
    const ep = sdk().endpoint("ep-idle-js")!;
    const { id } = await ep.run({ input: { scene: "waits for a worker" } });
    sim.setEndpoint({ id: "ep-idle-js", workersMax: 1 });
    let status = await ep.statusSync(id, 60_000);
    for (let i = 0; i < 20 && status.status !== "COMPLETED"; i++) status = await ep.statusSync(id, 60_000);
    expect(status).toMatchObject({ id, status: "COMPLETED" });
    sim.setEndpoint({ id: "ep-idle-js", workersMax: 0 });
  });

  it("purgeQueue removes queued jobs", async () => {
    const ep = sdk().endpoint("ep-idle-js")!;
    await ep.run({ input: { scene: "a" } });
    await ep.run({ input: { scene: "b" } });
    expect(await ep.purgeQueue()).toEqual({ removed: 2, status: "completed" });
    expect((await ep.health()).jobs.inQueue).toBe(0);
  });

  it("health has the documented counters", async () => {
    const health = await sdk().endpoint("ep-tts-js")!.health();
    expect(Object.keys(health.jobs)).toEqual(
      expect.arrayContaining(["completed", "failed", "inProgress", "inQueue", "retried"]),
    );
    expect(Object.keys(health.workers)).toEqual(expect.arrayContaining(["idle", "running"]));
  });

  it("cancel ends a queued job", async () => {
    const ep = sdk().endpoint("ep-idle-js")!;
    const { id } = await ep.run({ input: { scene: "never runs" } });
    expect(await ep.cancel(id)).toMatchObject({ id, status: "CANCELLED" });
  });

  it("a wrong key is refused with 401", async () => {
    await expect(sdk("not-a-key").endpoint("ep-tts-js")!.health()).rejects.toThrow(/status code 401/);
  });
});
