// A graceful stop releases the lease even when a renew is under way: a renew whose read is answered
// after the release would otherwise see the lease free, take it again and leave it naming a
// stopped replica until it expires (the successor waits out the whole lease).
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { KubeApi } from "../../src/k8s/api.js";
import { LeaderElector } from "../../src/runtime/leader.js";

interface Lease {
  metadata: { name: string; resourceVersion: string };
  spec: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number };
}

/** One Lease with resourceVersion checks; the renew's read (the second read) waits for `gate`. */
function leaseStore() {
  let lease: Lease | undefined;
  let rv = 0;
  let reads = 0;
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const conflict = () => Object.assign(new Error("conflict"), { statusCode: 409, code: 409 });
  const api = {
    rawJson: async (verb: string, _path: string, body?: Lease) => {
      if (verb === "GET") {
        const n = ++reads;
        const answer = () => {
          if (!lease) throw Object.assign(new Error("not found"), { statusCode: 404, code: 404 });
          return structuredClone(lease);
        };
        if (n === 2) {
          // Read now, answered once the gate opens: the state then, as a slow read would see it.
          await gate;
        }
        return answer();
      }
      if (verb === "POST") {
        if (lease) throw conflict();
        lease = { ...body!, metadata: { ...body!.metadata, resourceVersion: String(++rv) } };
        return lease;
      }
      if (body!.metadata.resourceVersion !== lease?.metadata.resourceVersion) throw conflict();
      lease = { ...body!, metadata: { ...body!.metadata, resourceVersion: String(++rv) } };
      // The release lands: the renew's read is answered after it.
      if (!lease.spec.holderIdentity) setTimeout(open, 0);
      return lease;
    },
  } as unknown as KubeApi;
  return { api, holder: () => lease?.spec.holderIdentity, reads: () => reads, open: () => open() };
}

describe("LeaderElector.stop", () => {
  it("leaves the lease released when a renew was under way", async () => {
    const store = leaseStore();
    let leading = false;
    const elector = new LeaderElector(store.api, {
      namespace: "ns",
      name: "lease",
      identity: "replica-a",
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 20,
      log: pino({ level: "silent" }),
      onStartedLeading: () => (leading = true),
      onStoppedLeading: () => (leading = false),
    });
    elector.start();
    await expect.poll(() => leading).toBe(true);
    await expect.poll(() => store.reads()).toBe(2); // the renew's read, waiting
    const stopped = elector.stop();
    // If the stop waits for the renew, the gate opens on its own after a moment.
    const fallback = setTimeout(() => store.open(), 200);
    await stopped;
    clearTimeout(fallback);
    await new Promise((r) => setTimeout(r, 100)); // anything still under way lands
    expect(store.holder()).toBe("");
    expect(leading).toBe(false);
  });
});
