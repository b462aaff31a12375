// The informer's schema check is for what others write: a version the process wrote itself is
// cached without it, every other version is checked (and one that fails is kept out).
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import type { KubeApi, KubeObject } from "../../src/k8s/api.js";
import { Informer } from "../../src/runtime/informer.js";
import { OwnWrites } from "../../src/runtime/own-writes.js";

const Thing = z.object({
  apiVersion: z.string(),
  kind: z.literal("MediaJob"),
  metadata: z.object({ name: z.string(), namespace: z.string(), resourceVersion: z.string() }).loose(),
  spec: z.object({ size: z.number() }),
});
type Thing = z.infer<typeof Thing>;

const thing = (rv: string, size: unknown): KubeObject =>
  ({
    apiVersion: "v1",
    kind: "MediaJob",
    metadata: { name: "a", namespace: "ns", resourceVersion: rv },
    spec: { size },
  }) as never;

/** A KubeApi with an empty list and one watch whose events the test sends. */
function fakeApi() {
  let send: ((type: string, obj: KubeObject) => void) | undefined;
  const api = {
    objectPath: () => "/apis/x/v1/namespaces/ns/mediajobs",
    rawJson: () => Promise.resolve({ items: [], metadata: { resourceVersion: "1" } }),
    watch: (_p: string, _q: unknown, onEvent: (type: string, obj: KubeObject) => void) => {
      send = onEvent;
      return new Promise<void>(() => undefined);
    },
  } as unknown as KubeApi;
  return { api, send: (type: string, obj: KubeObject) => send!(type, obj) };
}

describe("Informer with ownVersion", () => {
  it("checks others' versions against the schema and takes its own without the check", async () => {
    const { api, send } = fakeApi();
    const own = new OwnWrites();
    const checked = vi.spyOn(Thing, "safeParse");
    const informer = new Informer<Thing>(api, {
      plural: "mediajobs",
      namespace: "ns",
      schema: Thing,
      ownVersion: (raw) => own.wrote(raw),
      log: pino({ level: "silent" }),
    });
    await informer.start();
    await vi.waitFor(() => expect(() => send("ADDED", thing("2", 1))).not.toThrow());
    expect(checked).toHaveBeenCalledTimes(1); // someone else's create
    own.record(thing("3", 2));
    send("MODIFIED", thing("3", 2));
    expect(checked).toHaveBeenCalledTimes(1); // ours
    expect(informer.get("ns", "a")?.spec.size).toBe(2);
    expect(own.wrote(thing("3", 2))).toBe(true); // the check claims nothing: the handlers still do
    send("MODIFIED", thing("4", "not a number")); // someone else's, invalid: checked and kept out
    expect(checked).toHaveBeenCalledTimes(2);
    expect(informer.get("ns", "a")).toBeUndefined();
    expect(informer.invalid).toBe(1);
    void informer.stop();
  });
});
