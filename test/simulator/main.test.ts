import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { request } from "undici";
import { describe, expect, it } from "vitest";
import { optionsFromArgs, parseEndpoint } from "../../tools/simulator/main.js";

describe("command line", () => {
  it("parses endpoint specs and flags", () => {
    expect(parseEndpoint("media-asr-dev,id=ep1,workload=asr,min=1,max=4,idle=30")).toEqual({
      name: "media-asr-dev",
      id: "ep1",
      workload: "asr",
      workersMin: 1,
      workersMax: 4,
      idleTimeout: 30,
    });
    expect(() => parseEndpoint("x,max=-1")).toThrow(/non-negative/);
    expect(() => parseEndpoint("x,color=red")).toThrow(/unknown key/);
    const opts = optionsFromArgs([
      "--port=0",
      "--api-key=a",
      "--api-key=b",
      "--endpoint=media-tts-dev",
      "--time-scale=0.01",
      '--faults={"dropCallback":0.5}',
    ]);
    expect(opts).toMatchObject({
      port: 0,
      apiKeys: ["a", "b"],
      endpoints: [{ name: "media-tts-dev" }],
      timeScale: 0.01,
      faults: { dropCallback: 0.5 },
      logLevel: "info",
    });
    expect(() => optionsFromArgs(['--faults={"dropCallback":3}'])).toThrow();
    expect(() => optionsFromArgs(["--payment-webhook-url=http://x"])).toThrow(/go together/);
  });

  it("prints SIMULATOR_URL once listening, serves, and stops cleanly on SIGTERM", async () => {
    const child = spawn(
      "node_modules/.bin/tsx",
      [
        "tools/simulator/main.ts",
        "--port",
        "0",
        "--endpoint",
        "media-asr-dev,id=ep-asr,max=1",
        "--time-scale",
        "0.01",
      ],
      { cwd: process.cwd(), stdio: ["ignore", "pipe", "pipe"] },
    );
    const lines: string[] = [];
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const firstLine = await new Promise<string>((resolve, reject) => {
      const rl = createInterface({ input: child.stdout });
      rl.on("line", (line) => {
        lines.push(line);
        if (lines.length === 1) resolve(line);
      });
      child.on("exit", () => reject(new Error("simulator exited before printing its URL")));
    });
    expect(firstLine).toMatch(/^SIMULATOR_URL=http:\/\/127\.0\.0\.1:\d+$/);
    const url = firstLine.slice("SIMULATOR_URL=".length);
    const res = await request(`${url}/_sim/endpoints/ep-asr`);
    expect(await res.body.json()).toMatchObject({
      id: "ep-asr",
      name: "media-asr-dev",
      workload: "asr",
      workersMax: 1,
    });
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(lines).toHaveLength(1);
  });
});
