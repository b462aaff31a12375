// queue: per GpuEndpoint, the in-flight window, our jobs at the provider, and the jobs waiting in
// Kubernetes for a slot, per account (docs/design.md, "Fair share"). Read from the cluster: the
// window from the GpuEndpoint's status, the rest from the MediaJobs themselves, so it is what
// `kubectl get` would show, not what a controller's memory holds.
import { getCondition } from "../crds/conditions.js";
import type { GpuEndpoint } from "../crds/gpuendpoint.js";
import type { MediaJob } from "../crds/mediajob.js";
import { pickEndpoint } from "../mediajob/admission.js";
import { providerWaitCause, type WaitCause } from "../mediajob/wait-cause.js";
import type { CliContext } from "./context.js";
import { humanDuration } from "./duration.js";
import { CliError, EXIT_OK } from "./errors.js";
import { listJobs } from "./jobs.js";
import { jobAccount } from "../mediajob/tenancy.js";
import { isPending } from "../mediajob/job.js";

export interface AccountQueue {
  account: string;
  waiting: number;
  /** How long the oldest waiting job of the account has existed, ms. */
  oldestMs: number;
}

export interface EndpointQueue {
  namespace: string;
  name: string;
  endpointId?: string;
  window?: number;
  inFlight: number;
  accounts: AccountQueue[];
  /** Why jobs wait in the provider's queue, from the endpoint's last /health (absent: none wait). */
  providerWait?: WaitCause;
}

const NO_ACCOUNT = "(none)";

/** The queues of the endpoints, from the GpuEndpoints and the MediaJobs as listed. */
export function endpointQueues(endpoints: GpuEndpoint[], jobs: MediaJob[], nowMs: number): EndpointQueue[] {
  const byKey = new Map<string, EndpointQueue>();
  const key = (ep: GpuEndpoint) => `${ep.metadata.namespace}/${ep.metadata.name}`;
  for (const ep of endpoints)
    byKey.set(key(ep), {
      namespace: ep.metadata.namespace ?? "",
      name: ep.metadata.name,
      ...(ep.status?.endpointId && { endpointId: ep.status.endpointId }),
      ...(ep.status?.window !== undefined && { window: ep.status.window }),
      inFlight: 0,
      accounts: [],
      ...providerWaitOf(ep),
    });
  const waiting = new Map<string, Map<string, AccountQueue>>();
  for (const job of jobs) {
    const ns = job.metadata.namespace ?? "";
    const s = job.status;
    if (s?.phase === "Processing" && s.endpointId) {
      for (const ep of endpoints)
        if (ep.metadata.namespace === ns && ep.status?.endpointId === s.endpointId)
          byKey.get(key(ep))!.inFlight++;
      continue;
    }
    if (!isPending(s) || getCondition(s?.conditions, "Queued")?.status !== "True") continue;
    const ep = pickEndpoint(
      job,
      endpoints.filter((e) => e.metadata.namespace === ns),
    );
    if (!ep) continue;
    const accounts = waiting.get(key(ep)) ?? new Map<string, AccountQueue>();
    waiting.set(key(ep), accounts);
    const account = jobAccount(job) ?? NO_ACCOUNT;
    const q = accounts.get(account) ?? { account, waiting: 0, oldestMs: 0 };
    accounts.set(account, q);
    q.waiting++;
    const created = Date.parse(String(job.metadata.creationTimestamp ?? ""));
    if (Number.isFinite(created)) q.oldestMs = Math.max(q.oldestMs, nowMs - created);
  }
  for (const [k, accounts] of waiting)
    byKey.get(k)!.accounts = [...accounts.values()].sort((a, b) => a.account.localeCompare(b.account));
  return [...byKey.values()].sort((a, b) =>
    `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`),
  );
}

function providerWaitOf(ep: GpuEndpoint): { providerWait?: WaitCause } {
  const health = ep.status?.health;
  const cause = health && providerWaitCause(health, ep.status?.workersMax ?? ep.spec.maxWorkers);
  return cause ? { providerWait: cause } : {};
}

export async function run(ctx: CliContext): Promise<number> {
  const { api } = await ctx.kube();
  const namespace = await ctx.listNamespace();
  const only = ctx.inv.args[0]?.replace(/^(?:gpuendpoints?|gpuep)\//, "");
  const [endpoints, jobs] = await Promise.all([
    api.list<GpuEndpoint>("gpuendpoints", namespace).then((l) => l.items),
    listJobs(api, namespace),
  ]);
  let queues = endpointQueues(endpoints, jobs, Date.now());
  if (only !== undefined) {
    queues = queues.filter((q) => q.name === only);
    if (queues.length === 0)
      throw new CliError(
        `no GpuEndpoint "${only}" in ${namespace === undefined ? "any namespace" : `namespace "${namespace}"`}`,
        "kubectl get gpuendpoints lists them",
      );
  }
  if (ctx.out.machine) {
    ctx.out.data({
      items: queues.map((q) => ({
        namespace: q.namespace,
        name: q.name,
        endpointId: q.endpointId ?? null,
        window: q.window ?? null,
        inFlight: q.inFlight,
        waiting: Object.fromEntries(q.accounts.map((a) => [a.account, a.waiting])),
        oldestWaitingSeconds: Object.fromEntries(
          q.accounts.map((a) => [a.account, Math.floor(a.oldestMs / 1000)]),
        ),
        providerWait: q.providerWait ?? null,
      })),
    });
    return EXIT_OK;
  }
  if (queues.length === 0) {
    ctx.out.note("No GpuEndpoints.");
    return EXIT_OK;
  }
  const all = ctx.inv.allNamespaces;
  const rows: string[][] = [];
  for (const q of queues) {
    const head = [
      ...(all ? [q.namespace] : []),
      q.name,
      q.window === undefined ? "<none>" : String(q.window),
      String(q.inFlight),
      q.providerWait?.reason ?? "-",
    ];
    if (q.accounts.length === 0) rows.push([...head, "-", "0", "-"]);
    for (const a of q.accounts) rows.push([...head, a.account, String(a.waiting), humanDuration(a.oldestMs)]);
  }
  ctx.out.table(
    [
      ...(all ? ["namespace"] : []),
      "endpoint",
      "window",
      "in flight",
      "provider",
      "account",
      "waiting",
      "oldest",
    ],
    rows,
  );
  // The provider-side causes, each once, with the fix.
  for (const q of queues)
    if (q.providerWait) ctx.out.line(`${q.name}: ${q.providerWait.reason}: ${q.providerWait.message}`);
  return EXIT_OK;
}
