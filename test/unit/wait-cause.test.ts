// Why jobs wait in the provider's queue, from /health and the endpoint's settings: the cause a
// user can act on (crash-looping workers first), as `kubectl media queue` and `doctor` show it.
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint } from "../support/builders.js";
import type { GpuEndpointStatus } from "../../src/crds/gpuendpoint.js";
import { endpointQueues } from "../../src/cli/queue.js";
import { providerWaitCause, type HealthCounts } from "../../src/mediajob/wait-cause.js";

describe("providerWaitCause", () => {
  it.each<[string, HealthCounts, number, string | undefined]>([
    ["nothing queued", { jobsInQueue: 0, workersRunning: 3 }, 3, undefined],
    [
      "workers crash as they start, though workers exist",
      { jobsInQueue: 5, workersUnhealthy: 2, workersInitializing: 1 },
      3,
      "WorkersUnhealthy",
    ],
    ["workersMax 0", { jobsInQueue: 5 }, 0, "NoWorkersAllowed"],
    ["no GPU of the requested types", { jobsInQueue: 5, workersThrottled: 2 }, 3, "WorkersThrottled"],
    ["the first workers starting", { jobsInQueue: 5, workersInitializing: 2 }, 3, "ScalingFromZero"],
    ["more workers starting", { jobsInQueue: 5, workersInitializing: 1, workersRunning: 1 }, 3, "ColdStart"],
    ["every allowed worker busy", { jobsInQueue: 5, workersRunning: 3 }, 3, "WorkersMaxReached"],
    ["none up, none starting yet", { jobsInQueue: 1 }, 3, "ScalingFromZero"],
    ["some up, the scaler still to add", { jobsInQueue: 1, workersRunning: 1 }, 3, "WaitingForScaler"],
  ])("%s", (_name, health, workersMax, reason) => {
    expect(providerWaitCause(health, workersMax)?.reason).toBe(reason);
  });

  it("tells crash-looping workers with the fix, not as a lack of capacity", () => {
    const cause = providerWaitCause({ jobsInQueue: 4, workersUnhealthy: 3, workersRunning: 0 }, 3);
    expect(cause?.message).toMatch(/3 worker\(s\) are unhealthy: they crash as they start/);
    expect(cause?.message).toMatch(/Fix: read the worker logs/);
  });
});

describe("kubectl media queue", () => {
  it("shows the provider-side cause per endpoint", () => {
    const ep = makeGpuEndpoint("asr")
      .ns("ns")
      .spec({ maxWorkers: 2 })
      .status({
        endpointId: "ep-1",
        workersMax: 2,
        window: 3,
        health: { jobsInQueue: 4, workersRunning: 2 },
      } as GpuEndpointStatus)
      .build();
    const [q] = endpointQueues([ep], [], Date.now());
    expect(q?.providerWait?.reason).toBe("WorkersMaxReached");
  });
});
