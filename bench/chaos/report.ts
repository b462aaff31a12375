// The result of a chaos run: the JSON written to bench/results/chaos.json and the table printed.

export interface ChaosResult {
  date: string;
  seed: number;
  jobs: number;
  mediaJobs: number;
  pipelines: number;
  durationSeconds: number;
  lost: number;
  executedMoreThanOnce: number;
  executedAgainAfterUnconfirmed: number;
  executedAgainCallbackDropped: number;
  executedAgainCallbackLate: number;
  answeredBeforeResubmission: number;
  unconfirmedResubmissions: number;
  /** UNCONFIRMED_SUBMISSION_POLICY of the run's controllers. */
  unconfirmedSubmissionPolicy: "fail" | "resubmit";
  /** Jobs that ended Failed with SubmissionUnconfirmed: the cost of at most once, not an invariant. */
  endedUnconfirmed: number;
  /** Of those, jobs whose unconfirmed submission did run at the provider (its result never arrived). */
  endedUnconfirmedExecuted: number;
  duplicateSteps: number;
  /**
   * Results adopted from a callback alone (AdoptedByCallback), their next step held: the run plays
   * the operator of the runbook, checks at the provider that the provider job is the job's own,
   * then accepts it (kubectl media accept). Not an invariant: the cost of a lost /run answer.
   */
  adoptedByCallback: number;
  /** Of those, adoptions of a provider job submitted for another job: invariant 0. */
  adoptedAnotherJob: number;
  paymentEvents: number;
  paymentEventsDuplicated: number;
  paymentEventsUnrecorded: number;
  staleAccounts: number;
  /** Customers whose jobs were metered, and those jobs (MediaJobs, pipeline steps included). */
  meteredCustomers: number;
  meteredJobs: number;
  /** GPU seconds the payment provider recorded for them. */
  meteredSeconds: number;
  /** Σ over customers of |metered − billable seconds the GPU provider reported for their jobs|: invariant 0. */
  meteredSecondsDiff: number;
  /** Σ over customers of |execution time recorded − the provider's executionTime|, s: invariant 0. */
  executionSecondsDiff: number;
  /** The provider's bill over the run (its billing history), and how the product split it, micro-USD. */
  providerCostMicros: number;
  allocatedCostMicros: number;
  unallocatedCostMicros: number;
  /** |allocated + unallocated − the provider's bill|: invariant 0. */
  allocatedCostDiffMicros: number;
  /** Identifiers recorded twice or with another value than their attempt's: invariant 0. */
  meterEventsDuplicated: number;
  /** Attempts marked reported that the payment provider has no event for: invariant 0. */
  meterEventsLost: number;
  /** Attempts still unreported at the end: invariant 0. */
  meterBacklog: number;
  /** Attempts whose report was refused (never sent): invariant 0 here (no report is that old). */
  meterRefused: number;
  /** Runs of jobs ended SubmissionUnconfirmed: never confirmed, so never recorded. Not an invariant. */
  unconfirmedRunSeconds: number;
  /** Customers on plans (a capped plan, held at the cap, then upgraded), and their MediaJobs. */
  planCustomers: number;
  planJobs: number;
  /** The capped plan's GPU seconds per period. */
  planCapSeconds: number;
  /** Customers whose account was seen at its cap (each held there, then upgraded). */
  usageLimitReached: number;
  /** The most of their jobs seen waiting with UsageLimitReached at once. */
  usageLimitWaitingSeen: number;
  /**
   * The most seconds any customer was billed past its plan's cap by attempts submitted after its
   * ended jobs' billed seconds reached the cap, or started at the provider (its own record) after
   * that and the controller's reaction (beyond the jobs already running then): invariant 0.
   */
  usageLimitOvershootSeconds: number;
  /** The most seconds any customer was billed past its cap under the capped plan, running jobs included. */
  usageLimitOvershootRawSeconds: number;
  /** The longest from a customer's ended jobs reaching its cap to its account seen showing it, s. */
  usageLimitCountLagSeconds: number;
  /** The most jobs any customer had running at once beyond its plan's maxConcurrentJobs: invariant 0. */
  concurrencyOverPlan: number;
  /** The most jobs any customer on a plan had running at once. */
  planMaxRunning: number;
  /**
   * Jobs of more accounts, created in bursts (fair share): two accounts' bursts, the low-priority
   * pattern (low jobs, then another account's normal jobs) and the backlog a new leader starts with.
   */
  burstJobs: number;
  /** The low-priority pattern's low jobs, and those that completed (they wait for free workers). */
  lowPriorityJobs: number;
  lowPriorityCompleted: number;
  /** Jobs created while no replica led, waiting when the next leader started (at least 1). */
  leaderStartBacklog: number;
  /** Top-level jobs that waited past the fair-share bound (docs/design.md, "Fair share"). */
  jobsOverWaitBound: number;
  /** The largest wait over its bound (under 1: every job kept it). */
  worstWaitOverBound: number;
  /** Single-step jobs with a tenant's input and a declared output, through the object store. */
  mediaStorageJobs: number;
  /** Of those, jobs whose worker left its output at the provider (kept by the controller). */
  mediaHostedJobs: number;
  mediaCompleted: number;
  hostedCompleted: number;
  /** Declared outputs of Completed jobs not in the store with their recorded size and digest: invariant 0. */
  outputsMissing: number;
  /** Attempt objects of jobs that are gone, after their deletion and the sweep: invariant 0. */
  orphanObjects: number;
  /** The most of those seen while waiting for the sweep (the deletion's cleanup failed for them). */
  orphansBeforeSweep: number;
  /** status.outputs keys of Completed jobs outside their namespace's prefix: invariant 0. */
  crossTenantCacheHits: number;
  byPhase: Record<string, number>;
  faults: {
    controllerKills: number;
    sidecarKills: number;
    controlPlaneRestarts: number;
    ignoreClientId: boolean;
    droppedCallbacks: number;
    duplicatedCallbacks: number;
    serverErrors: number;
    lostRunAnswers: number;
    jobsFailedOnce: number;
    workersMaxLowered: number;
    /** Exits the stack's processes made on their own (a controller that lost its lease exits). */
    selfExits: number;
    paymentPosts: number;
    paymentAnswers: Record<string, number>;
    /** The object store's front: requests, 5xx, presigned requests refused as expired, slow PUTs, outages. */
    storage: {
      requests: number;
      serverErrors: number;
      expiredUrls: number;
      slowPuts: number;
      refused: number;
      outages: number;
    };
  };
  /** The invariants that failed, empty when the run passed. */
  broken: string[];
  /** Up to 20 examples per broken invariant, to start the investigation from. */
  examples: Record<string, unknown[]>;
}

/** The hard invariants: each must be 0. */
export const INVARIANTS = [
  "lost",
  "executedMoreThanOnce",
  "duplicateSteps",
  "adoptedAnotherJob",
  "paymentEventsDuplicated",
  "paymentEventsUnrecorded",
  "staleAccounts",
  "meteredSecondsDiff",
  "executionSecondsDiff",
  "allocatedCostDiffMicros",
  "meterEventsDuplicated",
  "meterEventsLost",
  "meterBacklog",
  "meterRefused",
  "jobsOverWaitBound",
  "usageLimitOvershootSeconds",
  "concurrencyOverPlan",
  "outputsMissing",
  "orphanObjects",
  "crossTenantCacheHits",
] as const;

export function table(r: ChaosResult): string {
  const rows: Array<[string, string | number, string]> = [
    [
      "jobs (top-level MediaJobs)",
      r.jobs,
      `${r.pipelines} of them 3-step pipelines; ${r.mediaJobs} MediaJobs in all`,
    ],
    ["jobs lost (not terminal by the deadline)", r.lost, "invariant: 0"],
    [
      "jobs that waited past the fair-share bound",
      r.jobsOverWaitBound,
      `invariant: 0 (${r.burstJobs} burst jobs of 5 more accounts, ${r.lowPriorityJobs} of them low priority ` +
        `(${r.lowPriorityCompleted} completed), ${r.leaderStartBacklog} waiting for a new leader; ` +
        `worst wait / bound ${r.worstWaitOverBound})`,
    ],
    [
      "jobs run more than once",
      r.executedMoreThanOnce,
      "invariant: 0 (runs beyond 1 + retries after FAILED)",
    ],
    [
      "  run again after an unconfirmed resubmission",
      r.executedAgainAfterUnconfirmed,
      "policy resubmit only:",
    ],
    ["    its callback dropped by the provider", r.executedAgainCallbackDropped, ""],
    [
      "    its callback sent, not accepted in time",
      r.executedAgainCallbackLate,
      "every attempt failed, or came after the deadline",
    ],
    [
      "      answered 2xx before the resubmission",
      r.answeredBeforeResubmission,
      "expected 0: a callback in time that did not help",
    ],
    ["unconfirmed resubmissions", r.unconfirmedResubmissions, "sum of status.unconfirmedResubmissions"],
    [
      "jobs ended Failed: SubmissionUnconfirmed",
      r.endedUnconfirmed,
      `not an invariant: the cost of at most once (policy ${r.unconfirmedSubmissionPolicy})`,
    ],
    [
      "  their submission ran, result never arrived",
      r.endedUnconfirmedExecuted,
      "the rest were never accepted by the provider",
    ],
    ["duplicated pipeline steps", r.duplicateSteps, "invariant: 0"],
    [
      "results adopted from a callback alone",
      r.adoptedByCallback,
      "not an invariant: checked at the provider, then accepted, as the runbook says",
    ],
    ["  of a provider job submitted for another job", r.adoptedAnotherJob, "invariant: 0"],
    [
      "PaymentEvent records > 1 per event id",
      r.paymentEventsDuplicated,
      `invariant: 0 (of ${r.paymentEvents} events)`,
    ],
    ["events without a PaymentEvent record", r.paymentEventsUnrecorded, "invariant: 0"],
    ["BillingAccounts not in the newest event's state", r.staleAccounts, "invariant: 0"],
    [
      "metered seconds off the provider's billable seconds",
      r.meteredSecondsDiff,
      `invariant: 0 (${r.meteredSeconds} s metered for ${r.meteredCustomers} customers, ${r.meteredJobs} jobs)`,
    ],
    ["execution seconds off the provider's executionTime", r.executionSecondsDiff, "invariant: 0 (ms exact)"],
    [
      "provider bill off allocated + unallocated (µUSD)",
      r.allocatedCostDiffMicros,
      `invariant: 0 (${r.providerCostMicros} µUSD billed: ${r.allocatedCostMicros} to accounts, ${r.unallocatedCostMicros} unallocated)`,
    ],
    ["meter identifiers recorded twice or changed", r.meterEventsDuplicated, "invariant: 0"],
    ["usage marked reported the payment provider lacks", r.meterEventsLost, "invariant: 0"],
    ["usage unreported at the end", r.meterBacklog, "invariant: 0"],
    ["usage reports refused", r.meterRefused, "invariant: 0"],
    [
      "  runs never confirmed (SubmissionUnconfirmed)",
      r.unconfirmedRunSeconds,
      "not an invariant: billable seconds of runs no answer confirmed, not recorded",
    ],
    [
      "seconds past a plan's cap beyond the running jobs",
      r.usageLimitOvershootSeconds,
      `invariant: 0 (${r.planCustomers} customers, ${r.planJobs} jobs, cap ${r.planCapSeconds} s; ${r.usageLimitReached} reached it, up to ${r.usageLimitWaitingSeen} jobs seen waiting)`,
    ],
    [
      "  seconds past the cap, running jobs included",
      r.usageLimitOvershootRawSeconds,
      "not an invariant: the jobs already running when the limit was reached, and any above",
    ],
    [
      "  from the limit reached to the account showing it",
      r.usageLimitCountLagSeconds,
      "seconds, the longest; not an invariant: admission reads the account's count",
    ],
    [
      "jobs running at once beyond the plan's cap",
      r.concurrencyOverPlan,
      `invariant: 0 (most at once: ${r.planMaxRunning})`,
    ],
    [
      "media outputs missing from the store",
      r.outputsMissing,
      `invariant: 0 (${r.mediaStorageJobs} media jobs, ${r.mediaCompleted} completed; ` +
        `${r.mediaHostedJobs} left their output at the provider, ${r.hostedCompleted} kept and completed)`,
    ],
    [
      "objects of deleted jobs left in the store",
      r.orphanObjects,
      `invariant: 0 (after the sweep; up to ${r.orphansBeforeSweep} left by the deletion during the store's outage)`,
    ],
    ["outputs outside their namespace's prefix", r.crossTenantCacheHits, "invariant: 0"],
    ["faults: controller leader SIGKILLs", r.faults.controllerKills, ""],
    ["faults: sidecar SIGKILLs", r.faults.sidecarKills, ""],
    ["faults: control plane restarts", r.faults.controlPlaneRestarts, "same data directory"],
    ["faults: provider ignores client ids", String(r.faults.ignoreClientId), "RunPod mode"],
    ["faults: callbacks dropped", r.faults.droppedCallbacks, ""],
    ["faults: callbacks duplicated", r.faults.duplicatedCallbacks, "also reordered and delayed"],
    ["faults: provider 5xx", r.faults.serverErrors, ""],
    ["faults: /run answers lost after acceptance", r.faults.lostRunAnswers, ""],
    ["faults: jobs FAILED at least once", r.faults.jobsFailedOnce, "maxAttempts 2"],
    ["faults: workersMax lowered at the provider", r.faults.workersMaxLowered, ""],
    [
      "faults: processes that exited on their own",
      r.faults.selfExits,
      `restarted${selfExitReasons(r.examples.selfExits)}`,
    ],
    [
      "faults: object store",
      r.faults.storage.outages,
      `outages; ${r.faults.storage.serverErrors} 5xx, ${r.faults.storage.expiredUrls} presigned requests refused as expired, ` +
        `${r.faults.storage.slowPuts} slow PUTs, ${r.faults.storage.refused} connections reset, of ${r.faults.storage.requests}`,
    ],
    [
      "payment posts (20 per delivery, 2 sidecars)",
      r.faults.paymentPosts,
      JSON.stringify(r.faults.paymentAnswers),
    ],
  ];
  const w0 = Math.max(...rows.map((x) => x[0].length));
  const w1 = Math.max(...rows.map((x) => String(x[1]).length));
  return rows.map(([a, b, c]) => `${a.padEnd(w0)}  ${String(b).padStart(w1)}  ${c}`).join("\n");
}

/** What the processes that exited on their own said last, counted: "; lost the lease x2". */
function selfExitReasons(exits: unknown[] | undefined): string {
  const counts = new Map<string, number>();
  for (const e of (exits ?? []) as Array<{ process: string; code: number; lastMessage: string }>) {
    const why = `${e.process.replace(/-\d+$/, "")} exit ${e.code}: ${e.lastMessage}`;
    counts.set(why, (counts.get(why) ?? 0) + 1);
  }
  return [...counts].map(([why, n]) => `; ${why}${n > 1 ? ` (x${n})` : ""}`).join("");
}
