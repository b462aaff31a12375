// make bench BENCH_ARGS="--only cost": what each pricing rule recovers of the GPU provider's bill.
// The simulator bills worker time as RunPod documents it (cold start, execution, idle tail, rounded
// up per worker run) and serves it as RunPod's billing history; jobs go through its job API. The
// provider's hourly buckets are then allocated to the customers with the product's own functions
// (src/billing/cost-allocation.ts, worker-cost.ts) and metered under each rule (src/mediajob/usage.ts
// billableSeconds for `execution`, at the provider's own price per GPU second). No control plane:
// the controller's cost loop runs these same pure functions on the same records.
//   scenarios: sparse (isolated 2 s jobs, 10 s and 30 s cold starts), saturated (a burst), mixed
//   (a sparse customer beside a burst on one endpoint).
import {
  allocate,
  usdToMicros,
  type ExecutionSpan,
  type ProviderBucket,
} from "../src/billing/cost-allocation.js";
import { planWorkerCostEvents } from "../src/billing/worker-cost.js";
import { billableSeconds } from "../src/mediajob/usage.js";
import type { ProviderJobStatus } from "../src/provider/schemas.js";
import { startSimulator, type Simulator } from "../tools/simulator/server.js";

const H = 3_600_000;
const KEY = "sim-key";
/** Simulated time runs this much faster than real time (a 10 s cold start takes 100 ms). */
const TIME_SCALE = 0.01;

interface RuleResult {
  /** Micro-USD the customer is charged under the rule. */
  meteredMicros: number;
  /** meteredMicros over the provider cost allocated to it. */
  recovery: number;
}

interface CustomerResult {
  customer: string;
  jobs: number;
  /** Whole seconds metered under `execution` (billableSeconds per attempt). */
  executionSeconds: number;
  allocatedMicros: number;
  execution: RuleResult;
  workerCost: RuleResult;
}

export interface CostScenario {
  name: string;
  coldStartSeconds: number;
  idleTimeoutSeconds: number;
  jobs: number;
  providerCostMicros: number;
  providerWorkerSeconds: number;
  /** What no job reached (idle tails past their hour): the endpoint's unallocated cost. */
  unallocatedMicros: number;
  /** The provider's price of a GPU second: what `execution` charges per metered second here. */
  pricePerSecondMicros: number;
  customers: CustomerResult[];
  total: { execution: RuleResult; workerCost: RuleResult };
}

interface Plan {
  name: string;
  coldStartSeconds: number;
  workersMax: number;
  /** customer, simulated ms after the start when its job is submitted, or "isolated": after the endpoint went cold. */
  jobs: Array<{ customer: string; atMs: number | "isolated" }>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function run(sim: Simulator, input: Record<string, unknown> = {}): Promise<string> {
  const res = await fetch(`${sim.url}/v2/ep/run`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ input }),
  });
  if (!res.ok) throw new Error(`/run answered ${res.status}`);
  return ((await res.json()) as { id: string }).id;
}

const allStopped = (sim: Simulator) => sim.workerLedger("ep").every((r) => r.stoppedAt !== undefined);

async function until(test: () => boolean, what: string, realMs = 600_000): Promise<void> {
  const deadline = Date.now() + realMs;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`cost bench: timed out waiting for ${what}`);
    await sleep(1);
  }
}

/** The provider's billing history for the endpoint over the run, as the cost loop reads it. */
async function billing(sim: Simulator, fromMs: number, toMs: number): Promise<ProviderBucket[]> {
  const q = new URLSearchParams({
    bucketSize: "hour",
    startTime: new Date(Math.floor(fromMs / H) * H).toISOString(),
    endTime: new Date(Math.ceil(toMs / H) * H + H).toISOString(),
    serverlessId: "ep",
  });
  const res = await fetch(`${sim.url}/v2/billing/serverless?${q}`, {
    headers: { authorization: `Bearer ${KEY}` },
  });
  const body = (await res.json()) as {
    records: Array<{ startTime: string; endTime: string; totalAmount: number }>;
  };
  return body.records.map((r) => ({
    endpointId: "ep",
    startMs: Date.parse(r.startTime),
    endMs: Date.parse(r.endTime),
    amountMicros: usdToMicros(r.totalAmount),
  }));
}

const ratio = (a: number, b: number) => (b === 0 ? 0 : Math.round((a / b) * 1000) / 1000);

async function scenario(plan: Plan): Promise<CostScenario> {
  const idleTimeoutSeconds = 5;
  const sim = await startSimulator({
    timeScale: TIME_SCALE,
    coldStartMs: plan.coldStartSeconds * 1000,
    executionMs: 2_000,
    endpoints: [
      { id: "ep", name: "media-render-cost", workersMax: plan.workersMax, idleTimeout: idleTimeoutSeconds },
    ],
  });
  try {
    const startWall = sim.wallAt(0);
    const submitted: Array<{ id: string; customer: string }> = [];
    // Each job as it ended: the provider forgets a finished job after its retention (30 minutes).
    const seen = new Map<string, NonNullable<ReturnType<Simulator["getJob"]>>>();
    const ended = (id: string): boolean => {
      if (seen.has(id)) return true;
      const job = sim.getJob(id);
      if (!job || !["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(job.status)) return false;
      seen.set(id, job);
      return true;
    };
    const timed = plan.jobs
      .filter((j) => j.atMs !== "isolated")
      .sort((a, b) => (a.atMs as number) - (b.atMs as number));
    // Timed jobs go at their simulated instants; isolated ones after them, each on a cold endpoint.
    const t0 = Date.now();
    for (const j of timed) {
      const dueReal = t0 + (j.atMs as number) * TIME_SCALE;
      if (dueReal > Date.now()) await sleep(dueReal - Date.now());
      submitted.push({ id: await run(sim), customer: j.customer });
    }
    await until(() => submitted.every((s) => ended(s.id)), "the timed jobs");
    for (const j of plan.jobs.filter((x) => x.atMs === "isolated")) {
      await until(() => allStopped(sim), "the workers to stop");
      const id = await run(sim);
      submitted.push({ id, customer: j.customer });
      await until(() => ended(id), "an isolated job");
    }
    await until(() => allStopped(sim), "the workers to stop");

    const ledger = sim.workerLedger("ep");
    const price = ledger[0]!.pricePerSecondMicros;
    const endWall = sim.wallAt(Math.max(...ledger.map((r) => r.stoppedAt!)));
    const buckets = await billing(sim, startWall, endWall);
    const spans: ExecutionSpan[] = [];
    const byCustomer = new Map<string, { jobs: number; seconds: number }>();
    for (const s of submitted) {
      const job = seen.get(s.id)!;
      const end = sim.wallAt(job.timeline.ended!);
      spans.push({
        account: s.customer,
        endpointId: "ep",
        startMs: end - (job.executionTime ?? 0),
        endMs: end,
      });
      const billed = billableSeconds({
        status: job.status as ProviderJobStatus,
        ...(job.executionTime !== undefined && { executionTime: job.executionTime }),
        ...(job.delayTime !== undefined && { delayTime: job.delayTime }),
      });
      const c = byCustomer.get(s.customer) ?? { jobs: 0, seconds: 0 };
      c.jobs++;
      c.seconds += billed.ok ? billed.seconds : 0;
      byCustomer.set(s.customer, c);
    }
    const providerCostMicros = buckets.reduce((n, b) => n + b.amountMicros, 0);
    const ledgerMicros = ledger.reduce((n, r) => n + r.amountMicros, 0);
    if (ledgerMicros !== providerCostMicros)
      throw new Error(
        `cost bench: billing history ${providerCostMicros} against the ledger's ${ledgerMicros}`,
      );
    const allocation = allocate(buckets, spans, new Set(byCustomer.keys()));
    const unallocatedMicros = [...allocation.unallocated.values()].reduce((a, b) => a + b, 0);
    const customers: CustomerResult[] = [...byCustomer.entries()].map(([customer, c]) => {
      const allocatedMicros = allocation.accounts.get(customer)?.micros ?? 0;
      const workerCostMicros = planWorkerCostEvents({
        account: customer,
        buckets,
        spans,
        fromMs: 0,
        toMs: Infinity,
      }).reduce((n, e) => n + e.micros, 0);
      return {
        customer,
        jobs: c.jobs,
        executionSeconds: c.seconds,
        allocatedMicros,
        execution: { meteredMicros: c.seconds * price, recovery: ratio(c.seconds * price, allocatedMicros) },
        workerCost: { meteredMicros: workerCostMicros, recovery: ratio(workerCostMicros, allocatedMicros) },
      };
    });
    const allocated = customers.reduce((n, c) => n + c.allocatedMicros, 0);
    if (allocated + unallocatedMicros !== providerCostMicros)
      throw new Error(
        `cost bench: allocated ${allocated} + unallocated ${unallocatedMicros} != ${providerCostMicros}`,
      );
    const sum = (f: (c: CustomerResult) => number) => customers.reduce((n, c) => n + f(c), 0);
    return {
      name: plan.name,
      coldStartSeconds: plan.coldStartSeconds,
      idleTimeoutSeconds,
      jobs: submitted.length,
      providerCostMicros,
      providerWorkerSeconds: ledger.reduce((n, r) => n + r.billedSeconds, 0),
      unallocatedMicros,
      pricePerSecondMicros: price,
      customers,
      total: {
        execution: {
          meteredMicros: sum((c) => c.execution.meteredMicros),
          recovery: ratio(
            sum((c) => c.execution.meteredMicros),
            providerCostMicros,
          ),
        },
        workerCost: {
          meteredMicros: sum((c) => c.workerCost.meteredMicros),
          recovery: ratio(
            sum((c) => c.workerCost.meteredMicros),
            providerCostMicros,
          ),
        },
      },
    };
  } finally {
    await sim.close();
  }
}

const times = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));

export async function costBench(o: { log: (s: string) => void; sparseJobs?: number; burstJobs?: number }) {
  const sparse = o.sparseJobs ?? 200;
  const burst = o.burstJobs ?? 2_000;
  const plans: Plan[] = [
    ...[10, 30].map((cold) => ({
      name: `sparse: ${sparse} isolated 2 s jobs, ${cold} s cold start`,
      coldStartSeconds: cold,
      workersMax: 3,
      jobs: times(sparse, () => ({ customer: "cus_sparse", atMs: "isolated" as const })),
    })),
    {
      name: `saturated: a ${burst}-job burst of two customers`,
      coldStartSeconds: 10,
      workersMax: 10,
      jobs: times(burst, (i) => ({ customer: i % 2 ? "cus_burst_b" : "cus_burst_a", atMs: 0 })),
    },
    {
      name: `mixed: a ${burst / 2}-job burst, and a sparse customer's ${sparse / 4} jobs beside it and after`,
      coldStartSeconds: 10,
      workersMax: 10,
      jobs: [
        ...times(burst / 2, () => ({ customer: "cus_burst", atMs: 0 })),
        ...times(sparse / 8, (i) => ({ customer: "cus_sparse", atMs: i * 20_000 })),
        ...times(sparse / 8, () => ({ customer: "cus_sparse", atMs: "isolated" as const })),
      ],
    },
  ];
  const scenarios: CostScenario[] = [];
  for (const p of plans) {
    o.log(`  cost: ${p.name}...`);
    const s = await scenario(p);
    o.log(
      `    provider ${s.providerCostMicros} micro-USD (${s.providerWorkerSeconds} worker-s), unallocated ${s.unallocatedMicros}; ` +
        `recovery: execution ${s.total.execution.recovery}, worker cost ${s.total.workerCost.recovery}; ` +
        s.customers.map((c) => `${c.customer} ${c.execution.recovery}/${c.workerCost.recovery}`).join(", "),
    );
    scenarios.push(s);
  }
  return { timeScale: TIME_SCALE, scenarios };
}
