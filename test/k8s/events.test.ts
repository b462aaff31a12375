// Events as client-go's events recorder writes them: events.k8s.io/v1, and the same Event on the
// same object again within the series window is one more count of its series, not a new object.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import { KubeApi } from "../../src/k8s/api.js";
import { EventRecorder } from "../../src/k8s/events.js";
import { createTestNamespace, eventsOf, testKubeConfig } from "../support/kube.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

interface EventsV1 {
  items: Array<{ reason: string; note?: string; series?: { count: number }; regarding: { name: string } }>;
}

describe("Kubernetes Events", () => {
  it("counts a recurring Event in its series, and shows it to kubectl describe", async () => {
    const ns = await createTestNamespace(kc, "events");
    const target = makeMediaJob("recurring").ns(ns).uid("00000000-0000-0000-0000-000000000001").build();
    const rec = new EventRecorder(api, "controller", pino({ level: "silent" }));
    for (let i = 0; i < 3; i++)
      await rec.record(target, "Warning", "StatusCheckFailed", "the provider is down");
    await rec.record(target, "Normal", "Submitted", "submitted as abc-u1");

    const list = await api.rawJson<EventsV1>("GET", `/apis/events.k8s.io/v1/namespaces/${ns}/events`);
    const recurring = list.items.filter((e) => e.reason === "StatusCheckFailed");
    expect(recurring).toHaveLength(1);
    expect(recurring[0]!.series?.count).toBe(3);
    expect(list.items.filter((e) => e.reason === "Submitted")).toHaveLength(1);
    // The same Events through the core API, as `kubectl describe` lists them.
    expect((await eventsOf(kc, ns, "recurring")).map((e) => e.reason).sort()).toEqual([
      "StatusCheckFailed",
      "Submitted",
    ]);
  });
});
