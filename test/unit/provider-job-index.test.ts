// Which cached jobs hold a provider job id, kept from the informer's events: a submission asks it
// instead of walking the cache. It must say what a walk of the cache would say after any sequence
// of events, collisions and deletions included.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { ProviderJobIndex } from "../../src/controller/mediajob/provider-job-index.js";

const job = (name: string, providerJobId?: string): MediaJob =>
  makeMediaJob(name)
    .ns("ns")
    .status({ phase: "Processing", ...(providerJobId !== undefined && { providerJobId }) })
    .build();

describe("ProviderJobIndex", () => {
  it("follows a job's id through add, update and delete", () => {
    const ix = new ProviderJobIndex();
    ix.note("add", job("a"));
    expect(ix.holders("p1")).toEqual([]);
    ix.note("update", job("a", "p1"), job("a"));
    expect(ix.holders("p1")).toEqual(["ns/a"]);
    ix.note("update", job("a", "p2"), job("a", "p1"));
    expect([ix.holders("p1"), ix.holders("p2")]).toEqual([[], ["ns/a"]]);
    ix.note("delete", job("a", "p2"));
    expect(ix.holders("p2")).toEqual([]);
  });

  it("keeps every holder of a colliding id until each lets go", () => {
    const ix = new ProviderJobIndex();
    ix.note("add", job("a", "p1"));
    ix.note("add", job("b", "p1"));
    ix.note("add", job("c", "p1"));
    expect(ix.holders("p1").sort()).toEqual(["ns/a", "ns/b", "ns/c"]);
    ix.note("delete", job("b", "p1"));
    expect(ix.holders("p1").sort()).toEqual(["ns/a", "ns/c"]);
    ix.note("update", job("a"), job("a", "p1"));
    expect(ix.holders("p1")).toEqual(["ns/c"]);
  });

  it("agrees with a walk of the cache after any sequence of events", () => {
    const names = ["a", "b", "c", "d"];
    const ids = ["p1", "p2", undefined];
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ name: fc.constantFrom(...names), id: fc.constantFrom(...ids), del: fc.boolean() }),
          {
            maxLength: 40,
          },
        ),
        (steps) => {
          const ix = new ProviderJobIndex();
          const cache = new Map<string, MediaJob>();
          for (const s of steps) {
            const old = cache.get(s.name);
            if (s.del) {
              if (!old) continue;
              cache.delete(s.name);
              ix.note("delete", old);
            } else {
              const next = job(s.name, s.id);
              cache.set(s.name, next);
              ix.note(old ? "update" : "add", next, old);
            }
          }
          for (const id of ["p1", "p2"]) {
            const walked = [...cache.values()]
              .filter((j) => j.status?.providerJobId === id)
              .map((j) => `ns/${j.metadata.name}`);
            expect(ix.holders(id).sort()).toEqual(walked.sort());
          }
        },
      ),
    );
  });
});
