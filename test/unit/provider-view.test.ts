// The provider as GpuEndpoint reconciles see it: /health once per tick per endpoint, the endpoint
// list once per drift check, and an endpoint we saved taken from the provider's answer.
import { describe, expect, it } from "vitest";
import { ProviderView } from "../../src/controller/gpuendpoint/provider-view.js";
import type { EndpointHealthReport, ProviderEndpoint } from "../../src/provider/index.js";

const endpoint = (id: string, workersMax: number) =>
  ({ id, name: `media-${id}`, workersMin: 0, workersMax, idleTimeout: 5 }) as ProviderEndpoint;

function fakeProvider() {
  const calls = { list: 0, health: 0, key: 0 };
  let listed = [endpoint("a", 3), endpoint("b", 3)];
  return {
    calls,
    setListed: (l: ProviderEndpoint[]) => (listed = l),
    provider: {
      checkKey: async () => {
        calls.key++;
        return { accountId: "acct", via: "rest" as const };
      },
      listEndpoints: async () => {
        calls.list++;
        return listed;
      },
      health: async () => {
        calls.health++;
        return { jobs: {}, workers: {} } as unknown as EndpointHealthReport;
      },
    },
  };
}

describe("ProviderView", () => {
  it("asks for each endpoint's health once per tick and lists the endpoints once per drift check", async () => {
    let now = 0;
    const f = fakeProvider();
    const view = new ProviderView(f.provider, 1_000, 10_000, () => now);
    for (let tick = 0; tick < 10; tick++, now += 1_000) {
      // Several reconciles of both endpoints in one tick.
      for (let i = 0; i < 3; i++) {
        await view.listEndpoints();
        await view.endpointHealth("a");
        await view.endpointHealth("b");
      }
    }
    expect(f.calls.health).toBe(20);
    expect(f.calls.list).toBe(1);
    now += 1_000;
    await view.listEndpoints();
    expect(f.calls.list).toBe(2);
  });

  it("never keeps the list longer than a health report", async () => {
    let now = 0;
    const f = fakeProvider();
    const view = new ProviderView(f.provider, 1_000, 10, () => now);
    await view.listEndpoints();
    now += 500;
    await view.listEndpoints();
    expect(f.calls.list).toBe(1);
  });

  it("serves an endpoint we saved from the provider's answer, without listing again", async () => {
    const now = 0;
    const f = fakeProvider();
    const view = new ProviderView(f.provider, 1_000, 60_000, () => now);
    await view.listEndpoints();
    view.endpointSaved(endpoint("b", 7));
    expect((await view.listEndpoints()).map((e) => e.workersMax)).toEqual([3, 7]);
    expect(f.calls.list).toBe(1);
  });

  it("lists again at once when told the provider may have changed", async () => {
    const now = 0;
    const f = fakeProvider();
    const view = new ProviderView(f.provider, 1_000, 60_000, () => now);
    await view.listEndpoints();
    f.setListed([endpoint("a", 3)]);
    view.invalidateEndpoints();
    expect((await view.listEndpoints()).map((e) => e.id)).toEqual(["a"]);
    expect(f.calls.list).toBe(2);
  });
});
