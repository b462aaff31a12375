// A callback's read of its MediaJob (src/callback/read.ts): the API server's watch cache settles
// only a job whose current submission is recorded with the provider's id (the write that follows
// carries the cached resourceVersion, so a stale object is refused and read again); every other
// case is read again from etcd before it is answered.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { readCallbackJob, settledByCachedRead } from "../../src/callback/read.js";
import type { SubmissionRef } from "../../src/mediajob/result.js";
import { trackedJob } from "../support/builders.js";

const SUB: SubmissionRef = { uid: "uid-1", jobId: "uid-1", attempt: 2, id: "s-2" };
const job = (status: MediaJob["status"]): MediaJob => trackedJob().uid("uid-1").status(status).build();
const processing = (o: Partial<NonNullable<MediaJob["status"]>> = {}): MediaJob["status"] => ({
  phase: "Processing",
  jobId: "uid-1",
  attempts: 2,
  endpointId: "ep-1",
  providerJobId: "p-2",
  submission: { attempt: 2, id: "s-2", startedAt: "2026-01-01T00:00:00Z", state: "Accepted" },
  ...o,
});

describe("a cached read settles a callback", () => {
  it.each([
    ["its submission current and recorded with the provider's id", job(processing()), true],
    ["no such job in the cache", undefined, false],
    [
      "the provider's id not recorded yet (the callback may beat the record)",
      job(processing({ providerJobId: undefined })),
      false,
    ],
    [
      "another submission (the cache may predate this one)",
      job(
        processing({
          submission: { attempt: 1, id: "s-1", startedAt: "2026-01-01T00:00:00Z", state: "Accepted" },
        }),
      ),
      false,
    ],
    ["finished", job(processing({ phase: "Completed" })), false],
    ["another object of the same name", trackedJob().uid("uid-0").status(processing()).build(), false],
  ])("%s: %s", (_what, cached, settled) => {
    expect(settledByCachedRead(cached, SUB)).toBe(settled);
  });
});

describe("readCallbackJob", () => {
  const api = (cached: MediaJob | undefined, fresh: MediaJob | undefined) => {
    const calls: Array<boolean> = [];
    return {
      calls,
      get: <T>(_p: string, _ns: string, _n: string, opts?: { fromCache?: boolean }) => {
        calls.push(opts?.fromCache === true);
        return Promise.resolve((opts?.fromCache ? cached : fresh) as T | undefined);
      },
    };
  };

  it("answers from the cache when the cache settles it: one read, no etcd read", async () => {
    const a = api(job(processing()), undefined);
    expect((await readCallbackJob(a as never, "ns", "j", SUB))?.status?.providerJobId).toBe("p-2");
    expect(a.calls).toEqual([true]);
  });

  it("reads from etcd when it does not, and answers with that read", async () => {
    const fresh = job(processing());
    const a = api(job(processing({ providerJobId: undefined })), fresh);
    expect(await readCallbackJob(a as never, "ns", "j", SUB)).toBe(fresh);
    expect(a.calls).toEqual([true, false]);
  });
});
