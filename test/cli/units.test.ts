// The CLI's pure parts: durations, tables, masking, the command line, the stuck rule, the waiting
// rule, the Node check.
import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import { parseCommandLine } from "../../src/cli/args.js";
import { humanDuration, parseDuration } from "../../src/cli/duration.js";
import { UsageError } from "../../src/cli/errors.js";
import { findStuck } from "../../src/cli/jobs.js";
import { nodeVersionProblem } from "../../src/cli/node-version.js";
import { formatTable, Output } from "../../src/cli/output.js";
import { attemptTimes, verdict } from "../../src/cli/status.js";
import { waitingFindings, waitOf } from "../../src/cli/waiting.js";
import type { JobPhase, MediaJobStatus } from "../../src/crds/mediajob.js";

describe("durations", () => {
  it("reads kubectl-style durations", () => {
    expect(parseDuration("90s", "--x")).toBe(90_000);
    expect(parseDuration("5m", "--x")).toBe(300_000);
    expect(parseDuration("2h", "--x")).toBe(7_200_000);
    expect(parseDuration("1d", "--x")).toBe(86_400_000);
    expect(parseDuration("1h30m", "--x")).toBe(5_400_000);
    expect(parseDuration("500ms", "--x")).toBe(500);
    expect(parseDuration("1.5h", "--x")).toBe(5_400_000);
    expect(parseDuration("0s", "--x")).toBe(0);
  });

  it.each(["10", "", "5 m", "m", "1w", "-5m", "5m3", "1h 2m"])("refuses %j, naming the flag", (text) => {
    expect(() => parseDuration(text, "--older-than")).toThrow(UsageError);
    expect(() => parseDuration(text, "--older-than")).toThrow(/--older-than.*90s, 5m, 2h, 1d/);
  });

  it("prints ages as kubectl does", () => {
    expect(humanDuration(45_000)).toBe("45s");
    expect(humanDuration(200_000)).toBe("3m20s");
    expect(humanDuration(12 * 60_000)).toBe("12m");
    expect(humanDuration((5 * 60 + 3) * 60_000)).toBe("5h3m");
    expect(humanDuration(20 * 3_600_000)).toBe("20h");
    expect(humanDuration((3 * 24 + 4) * 3_600_000)).toBe("3d4h");
    expect(humanDuration(40 * 86_400_000)).toBe("40d");
    expect(humanDuration(-5)).toBe("0s");
  });
});

describe("output", () => {
  it("lays out tables like kubectl", () => {
    expect(
      formatTable(
        ["name", "phase"],
        [
          ["a", "Processing"],
          ["longer-name", "Pending"],
        ],
      ),
    ).toBe("NAME          PHASE\na             Processing\nlonger-name   Pending");
  });

  it("masks every registered secret, in every stream and format", () => {
    let stdout = "";
    let stderr = "";
    const out = new Output("json", {
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
    });
    out.addSecrets("key-123456", "key-123456-longer", undefined, "ab");
    out.data({ message: "echoed key-123456-longer and key-123456" });
    out.note("error: key-123456");
    out.line("ab stays: too short to be a secret");
    expect(stdout + stderr).not.toContain("key-123456");
    expect(stdout).toContain("echoed [REDACTED] and [REDACTED]");
    expect(stderr).toBe("error: [REDACTED]\n");
    expect(stdout).toContain("ab stays");
  });
});

describe("command line", () => {
  const usage = (argv: string[]) => {
    try {
      parseCommandLine(argv);
    } catch (err) {
      expect(err).toBeInstanceOf(UsageError);
      return (err as UsageError).message;
    }
    throw new Error(`no usage error for ${argv.join(" ")}`);
  };

  it("takes kubectl's global flags anywhere on the line", () => {
    const inv = parseCommandLine(["-n", "media", "status", "mj/job-1", "-o", "json", "--context=prod"]);
    expect(inv).toMatchObject({
      command: "status",
      args: ["job-1"],
      namespace: "media",
      format: "json",
      context: "prod",
      requestTimeoutMs: 30_000,
    });
    expect(parseCommandLine(["stuck", "-A", "--older-than", "2h", "-oyaml"])).toMatchObject({
      allNamespaces: true,
      olderThanMs: 7_200_000,
      format: "yaml",
    });
    expect(parseCommandLine(["check-key", "--secret", "ops/orchestrator"])).toMatchObject({
      secret: { namespace: "ops", name: "orchestrator" },
    });
    expect(parseCommandLine(["recover", "--dry-run"])).toMatchObject({ dryRun: true, format: "table" });
  });

  it("answers help without running anything", () => {
    expect(parseCommandLine(["--help"])).toHaveProperty("help", expect.stringContaining("Commands:"));
    expect(parseCommandLine(["help", "reset"])).toHaveProperty("help", expect.stringContaining("test op"));
    expect(parseCommandLine(["recover", "-h"])).toHaveProperty("help", expect.stringContaining("--dry-run"));
  });

  it("refuses what a command does not take", () => {
    expect(usage([])).toBe("no command given");
    expect(usage(["restart"])).toBe('unknown command "restart"');
    expect(usage(["reset"])).toBe("reset needs <mediajob>");
    expect(usage(["bind", "ns"])).toBe("bind needs <namespace> <account>");
    expect(usage(["status", "a", "b"])).toBe('unexpected argument "b"');
    expect(usage(["reset", "a", "-o", "json"])).toBe("reset does not take -o");
    expect(usage(["status", "a", "-A"])).toBe("status does not take -A");
    expect(usage(["stuck", "--dry-run"])).toBe("stuck does not take --dry-run");
    expect(usage(["stuck", "-o", "wide"])).toMatch(/unknown output format "wide"/);
    expect(usage(["stuck", "-A", "-n", "x"])).toMatch(/either -n\/--namespace or -A/);
    expect(usage(["stuck", "--bogus"])).toMatch(/unknown flag '--bogus'/);
    expect(usage(["stuck", "-n"])).toMatch(/'-n, --namespace <value>' argument missing/);
    expect(usage(["check-key", "--secret", "a/b/c"])).toMatch(/--secret takes <namespace>\/<name>/);
    expect(usage(["check-key", "--request-timeout", "0s"])).toMatch(/greater than zero/);
    expect(usage(["status", "gpuendpoint/x"])).toMatch(/not a MediaJob name/);
  });
});

describe("the stuck rule", () => {
  const now = Date.parse("2025-01-01T12:00:00Z");
  const job = (name: string, phase: JobPhase, submittedMinutesAgo: number, timeoutSeconds?: number) =>
    makeMediaJob(name)
      .ns("ns")
      .spec(timeoutSeconds ? { timeoutSeconds } : {})
      .status({ phase, submittedAt: new Date(now - submittedMinutesAgo * 60_000).toISOString() })
      .build();
  const jobs = [
    job("old", "Processing", 30),
    job("young", "Processing", 5),
    job("own-short-timeout", "Processing", 5, 60),
    job("done", "Completed", 300),
    job("queued", "Pending", 300),
  ];

  it("is Processing past the job's own timeout, else the default; oldest first", () => {
    const names = findStuck(jobs, now, { defaultTimeoutSeconds: 600 }).map((s) => s.job.metadata.name);
    expect(names).toEqual(["old", "own-short-timeout"]);
  });

  it("with --older-than, is Processing longer than that, whatever the timeout", () => {
    const found = findStuck(jobs, now, { olderThanMs: 20 * 60_000, defaultTimeoutSeconds: 600 });
    expect(found.map((s) => s.job.metadata.name)).toEqual(["old"]);
    expect(found[0]).toMatchObject({ processingForMs: 30 * 60_000, limitMs: 20 * 60_000 });
    expect(findStuck(jobs, now, { olderThanMs: 0, defaultTimeoutSeconds: 600 })).toHaveLength(3);
  });
});

describe("jobs that wait", () => {
  const pending = (conditions: Array<{ type: string; status: string; reason: string }>) =>
    makeMediaJob("j")
      .ns("ns")
      .account("cus_x")
      .status({
        phase: "Pending",
        conditions: conditions.map((c) => ({
          ...c,
          message: `${c.reason} says why`,
          lastTransitionTime: "",
        })),
      } as MediaJobStatus)
      .build();

  it("a Pending job held by Admitted=False waits, with the reason and its fix", () => {
    const job = pending([{ type: "Admitted", status: "False", reason: "AccountUnknown" }]);
    expect(waitOf(job)?.condition.reason).toBe("AccountUnknown");
    const v = verdict(job, { state: "not-submitted", message: "" }, (verb) => verb);
    expect(v.attention).toBe(true);
    expect(v.summary).toContain("Admitted=False (AccountUnknown): AccountUnknown says why");
    expect(v.summary).not.toContain("within one tick");
    expect(v.next).toContain("subscription event for cus_x");
  });

  it("Queued=True and Suspended=True hold a job; admitted and ready, it does not wait", () => {
    expect(waitOf(pending([{ type: "Queued", status: "True", reason: "QuotaExceeded" }]))).toBeDefined();
    expect(waitOf(pending([{ type: "Suspended", status: "True", reason: "Suspended" }]))?.fix).toContain(
      "spec.suspend",
    );
    const free = pending([
      { type: "Admitted", status: "True", reason: "AccountActive" },
      { type: "EndpointReady", status: "True", reason: "EndpointReady" },
    ]);
    expect(waitOf(free)).toBeUndefined();
    expect(verdict(free, { state: "not-submitted", message: "" }, (v) => v).attention).toBe(false);
    expect(waitingFindings([free])).toMatchObject([{ result: "ok" }]);
  });

  it("doctor tells of jobs waiting by design (a full window, a plan's concurrency, suspended) without a warning", () => {
    const queued = pending([{ type: "Queued", status: "True", reason: "WindowFull" }]);
    const capped = pending([{ type: "Admitted", status: "False", reason: "ConcurrencyLimitReached" }]);
    const suspended = pending([{ type: "Suspended", status: "True", reason: "Suspended" }]);
    const unknown = pending([{ type: "Admitted", status: "False", reason: "AccountUnknown" }]);
    const found = waitingFindings([queued, capped, suspended, unknown]);
    expect(found.map((f) => [f.target, f.result])).toEqual([
      ["Admitted=False (AccountUnknown)", "warn"],
      ["Admitted=False (ConcurrencyLimitReached)", "ok"],
      ["Queued=True (WindowFull)", "ok"],
      ["Suspended=True (Suspended)", "ok"],
    ]);
  });

  it("status and doctor agree on what is a problem: a wait by design is not one for either", () => {
    const waits = [
      pending([{ type: "Queued", status: "True", reason: "WindowFull" }]),
      pending([{ type: "Admitted", status: "False", reason: "ConcurrencyLimitReached" }]),
      pending([{ type: "Suspended", status: "True", reason: "Suspended" }]),
      pending([{ type: "Admitted", status: "False", reason: "AccountUnknown" }]),
      pending([{ type: "EndpointReady", status: "False", reason: "EndpointMissing" }]),
    ];
    for (const job of waits) {
      const doctorSaysProblem = waitingFindings([job])[0]!.result !== "ok";
      const v = verdict(job, { state: "not-submitted", message: "" }, (verb) => verb);
      expect(v.attention, waitOf(job)!.condition.reason).toBe(doctorSaysProblem);
    }
    const suspended = verdict(waits[2]!, { state: "not-submitted", message: "" }, (verb) => verb);
    expect(suspended.summary).toContain("Pending, and it waits: Suspended=True (Suspended)");
    expect(suspended.summary).toContain("nothing to fix");
    expect(suspended.next).toContain("set spec.suspend to false when the job may run");
  });

  it("doctor groups waiting jobs by condition and reason", () => {
    const a = pending([{ type: "Admitted", status: "False", reason: "AccountUnknown" }]);
    const b = pending([{ type: "EndpointReady", status: "False", reason: "EndpointMissing" }]);
    const found = waitingFindings([a, a, b]);
    expect(found.map((f) => [f.target, f.result])).toEqual([
      ["Admitted=False (AccountUnknown)", "warn"],
      ["EndpointReady=False (EndpointMissing)", "warn"],
    ]);
    expect(found[0]!.message).toMatch(/^2 MediaJob\(s\) Pending: ns\/j, ns\/j/);
    expect(found[1]!.fix).toContain("apply a GpuEndpoint for workload asr");
  });
});

describe("the Node the CLI needs", () => {
  it("refuses Node 20 and 22 by name, and takes 24.11 and later", () => {
    expect(nodeVersionProblem("20.20.2")).toMatch(
      /needs Node\.js 24\.11 or newer; this is Node\.js 20\.20\.2/,
    );
    expect(nodeVersionProblem("22.21.0")).toBeDefined();
    expect(nodeVersionProblem("24.10.0")).toBeDefined();
    expect(nodeVersionProblem("24.21.0")).toBeUndefined();
    expect(nodeVersionProblem("25.0.0")).toBeUndefined();
  });
});

describe("status: each attempt's time at the provider", () => {
  it("shows the queue wait (cold start included) apart from the run", () => {
    expect(
      attemptTimes({
        usage: {
          workload: "asr",
          attempts: [
            {
              attempt: 1,
              providerJobId: "p-1",
              providerStatus: "CANCELLED",
              delayTimeMs: 61_000,
              executionTimeMs: 0,
              endedAt: "2026-01-01T00:00:00Z",
            },
            {
              attempt: 2,
              providerJobId: "p-2",
              providerStatus: "COMPLETED",
              delayTimeMs: 2_400,
              executionTimeMs: 12_345,
              endedAt: "2026-01-01T00:01:00Z",
            },
          ],
        },
      }),
    ).toEqual([
      "#1 CANCELLED: queue and cold start 61.0 s, run 0.0 s",
      "#2 COMPLETED: queue and cold start 2.4 s, run 12.3 s",
    ]);
  });
});

describe("waiting for the in-flight window's reasons", () => {
  const queued = (reason: string) =>
    makeMediaJob("j")
      .ns("ns")
      .spec({ priority: "low" })
      .status({
        phase: "Pending",
        conditions: [{ type: "Queued", status: "True", reason, message: "", lastTransitionTime: "" }],
      })
      .build();

  it("a low-priority job waiting for a free worker is by design; an unknown scaler needs a hand", () => {
    expect(waitOf(queued("LowPriority"))?.fix).toMatch(/never makes the endpoint scale/);
    expect(waitingFindings([queued("LowPriority")])).toMatchObject([{ result: "ok" }]);
    expect(waitOf(queued("ScalerUnknown"))?.fix).toMatch(/ScalerKnown/);
    expect(waitingFindings([queued("ScalerUnknown")])).toMatchObject([{ result: "warn" }]);
  });
});

describe("status: a job the provider forgot", () => {
  const processing = (expiresAt: string) =>
    makeMediaJob("j")
      .ns("ns")
      .status({
        phase: "Processing",
        providerJobId: "p-1",
        endpointId: "ep-1",
        submission: {
          attempt: 1,
          id: "s-1",
          startedAt: "2026-01-01T00:00:00Z",
          state: "Accepted",
          expiresAt,
        },
      })
      .build();
  const notFound = { state: "not-found" as const, id: "p-1", endpointId: "ep-1", message: "job not found" };

  it("past its ttl: expired, not to be replayed blindly", () => {
    const v = verdict(processing("2026-01-01T00:00:10Z"), notFound as never, (verb) => verb);
    expect(v.summary).toMatch(/policy.ttl \(queue plus run\) ran out/);
    expect(v.next).toMatch(/create the job again/);
  });

  it("before its ttl: lost, replayed", () => {
    const v = verdict(processing("2999-01-01T00:00:00Z"), notFound as never, (verb) => verb);
    expect(v.next).toMatch(/reset/);
  });
});

describe("status: a job whose outputs are being checked", () => {
  it("is not a missed callback: the controller checks the outputs before it completes the job", () => {
    const job = makeMediaJob("j")
      .ns("ns")
      .status({
        phase: "Processing",
        providerJobId: "p-1",
        endpointId: "ep-1",
        conditions: [
          {
            type: "OutputsVerified",
            status: "Unknown",
            reason: "ProviderCompleted",
            message: "",
            lastTransitionTime: "2026-01-01T00:00:00Z",
          },
        ],
      })
      .build();
    const found = { state: "found", job: { id: "p-1", status: "COMPLETED" } };
    const v = verdict(job, found as never, (verb) => verb);
    expect(v.attention).toBe(false);
    expect(v.summary).toContain("checking its declared outputs");
    expect(v.summary).not.toContain("callback was missed");
  });
});

describe("status: a job waiting in the provider's queue", () => {
  const waiting = (reason: string, message: string) =>
    makeMediaJob("j")
      .ns("ns")
      .status({
        phase: "Processing",
        providerJobId: "p-1",
        endpointId: "ep-1",
        conditions: [
          {
            type: "Queued",
            status: "True",
            reason,
            message: `waiting in the provider's queue: ${message}`,
            lastTransitionTime: "2026-01-01T00:00:00Z",
          },
        ],
      })
      .build();
  const inQueue = {
    state: "found" as const,
    id: "p-1",
    endpointId: "ep-1",
    job: { id: "p-1", status: "IN_QUEUE" },
  };

  it("names the cause the controller recorded; crash-looping workers need a hand, a cold start does not", () => {
    const crash = verdict(
      waiting("WorkersUnhealthy", "2 worker(s) are unhealthy. Fix: read the worker logs"),
      inQueue as never,
      (v) => v,
    );
    expect(crash.summary).toBe(
      "the job waits in the provider's queue (WorkersUnhealthy): 2 worker(s) are unhealthy. Fix: read the worker logs",
    );
    expect(crash.attention).toBe(true);
    const cold = verdict(waiting("ScalingFromZero", "1 worker(s) start"), inQueue as never, (v) => v);
    expect(cold.summary).toMatch(/\(ScalingFromZero\): 1 worker\(s\) start$/);
    expect(cold.attention).toBe(false);
  });
});
