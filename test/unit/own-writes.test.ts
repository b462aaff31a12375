import { describe, expect, it } from "vitest";
import { OwnWrites } from "../../src/runtime/own-writes.js";

const obj = (rv: string, name = "a") => ({ metadata: { name, namespace: "ns", resourceVersion: rv } });

describe("OwnWrites", () => {
  it("claims each version we wrote once, and nothing else", () => {
    const own = new OwnWrites();
    own.record(obj("10"));
    own.record(obj("11")); // a status write, then a finalizer patch in the same pass
    expect(own.claim(obj("9"))).toBe(false); // someone else's
    expect(own.claim(obj("10"))).toBe(true);
    expect(own.claim(obj("10"))).toBe(false);
    expect(own.claim(obj("12"))).toBe(false);
    expect(own.claim(obj("11"))).toBe(true);
    expect(own.size).toBe(0);
  });

  it("keeps a few versions per key (a version the watch never delivers does not pile up)", () => {
    const own = new OwnWrites();
    for (let rv = 1; rv <= 10; rv++) own.record(obj(String(rv)));
    expect(own.claim(obj("1"))).toBe(false);
    expect(own.claim(obj("10"))).toBe(true);
    own.forget(obj("10"));
    expect(own.size).toBe(0);
  });
});

describe("OwnWrites, when an event comes before its write's answer", () => {
  it("keeps nothing of that write waiting", () => {
    const own = new OwnWrites();
    const obj = { metadata: { name: "a", namespace: "ns", resourceVersion: "7", uid: "u" } };
    expect(own.claim(obj)).toBe(false); // the event, parsed: not known as ours yet
    own.record(obj); // the answer, just after
    expect(own.size).toBe(0);
    // A later write of ours is recorded as usual.
    own.record({ metadata: { ...obj.metadata, resourceVersion: "8" } });
    expect(own.size).toBe(1);
    expect(own.claim({ metadata: { ...obj.metadata, resourceVersion: "8" } })).toBe(true);
    expect(own.size).toBe(0);
  });
});
