// The dispatch benchmark's named scenarios (bench/dispatch.ts replays each with the in-flight
// window on and off, under both readings of RunPod's QUEUE_DELAY scaler). Plain data: what the
// endpoint is, which jobs arrive when, and what happens to the endpoint meanwhile.

export interface JobBatch {
  count: number;
  account: string;
  priority?: "low" | "normal";
  /** Seconds after the scenario's start the batch is created (all at once). Default 0. */
  atSeconds?: number;
  /** The batch the normalJobsDoneSeconds measure follows. */
  measured?: boolean;
}

export interface Scenario {
  name: string;
  /** A job's run at the provider, seconds (the simulator draws each within ±20 %). */
  jobSeconds: number;
  /** A worker's cold start, seconds (±20 % per worker). */
  coldStartSeconds: number;
  workersMin: number;
  workersMax: number;
  scaler: { type: "QUEUE_DELAY" | "REQUEST_COUNT"; value: number };
  batches: JobBatch[];
  /**
   * The jobs are in the cache when the replica starts leading, and the endpoint's status does not
   * record its scaler yet: the leader's first look at the endpoint is what sizes the window.
   */
  backlogAtLeaderStart?: boolean;
  /** spec.maxWorkers raised at this time (the provider's workersMax follows). */
  raiseWorkersMax?: { atSeconds: number; to: number };
  /** The simulator's crashLoopWorkers fault from the start until this time, then cleared. */
  crashLoopUntilSeconds?: number;
  /** spec.startDeadlineSeconds of every job. */
  startDeadlineSeconds?: number;
}

/** Every scenario of issue 39's list, sized as it asks (`scale` < 1 shrinks the job counts for tests). */
export function scenarios(scale = 1): Scenario[] {
  const n = (count: number) => Math.max(1, Math.round(count * scale));
  const burst = (count: number): JobBatch[] => [{ count: n(count), account: "acct-a" }];
  const base = { coldStartSeconds: 10, workersMin: 0, workersMax: 30 } as const;
  const queueDelay = { type: "QUEUE_DELAY", value: 4 } as const;
  return [
    { name: "scale from zero", ...base, jobSeconds: 30, scaler: queueDelay, batches: burst(2000) },
    { name: "scale from zero, 2 s jobs", ...base, jobSeconds: 2, scaler: queueDelay, batches: burst(2000) },
    {
      name: "REQUEST_COUNT, backlog at leader start",
      ...base,
      jobSeconds: 30,
      scaler: { type: "REQUEST_COUNT", value: 4 },
      batches: burst(2000),
      backlogAtLeaderStart: true,
    },
    {
      name: "workersMax raised 3 → 30 mid-burst",
      ...base,
      workersMax: 3,
      jobSeconds: 30,
      scaler: queueDelay,
      batches: burst(2000),
      raiseWorkersMax: { atSeconds: 300, to: 30 },
    },
    {
      name: "100 low-priority jobs, then 10 normal",
      ...base,
      jobSeconds: 30,
      scaler: queueDelay,
      batches: [
        { count: n(100), account: "acct-low", priority: "low" },
        { count: n(10), account: "acct-normal", atSeconds: 1, measured: true },
      ],
    },
    {
      name: "crash-looping workers, then recovery",
      ...base,
      jobSeconds: 30,
      scaler: queueDelay,
      batches: burst(300),
      crashLoopUntilSeconds: 120,
      startDeadlineSeconds: 300,
    },
    {
      // The crash outlasts the start deadline: the jobs at the provider end StartDeadlineExceeded
      // (cancelled in the queue, where they cost nothing), and the ones after them complete.
      name: "crash-looping workers past the start deadline",
      ...base,
      jobSeconds: 30,
      scaler: queueDelay,
      batches: burst(300),
      crashLoopUntilSeconds: 240,
      startDeadlineSeconds: 120,
    },
  ];
}
