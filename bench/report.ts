// Turns bench/results/latest.json into docs/benchmarks.md, with an SVG chart of memory against
// the number of cached jobs. The analysis is docs/benchmarks-notes.md, which the page links to;
// this file only lays out the measurements.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fitMarkdown } from "../scripts/markdown-fit.js";
import { REPO_ROOT } from "../test/support/controlplane.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const round2 = (x: number) => Math.round(x * 100) / 100;

interface Series {
  name: string;
  color: string;
  points: Array<{ x: number; y: number }>;
}

function lineChart(series: Series[], xLabel: string, yLabel: string): string {
  const W = 560;
  const H = 300;
  const pad = { l: 60, r: 20, t: 20, b: 45 };
  const all = series.flatMap((s) => s.points);
  const maxX = Math.max(...all.map((p) => p.x)) * 1.05;
  const maxY = Math.max(...all.map((p) => p.y)) * 1.15;
  const sx = (x: number) => pad.l + (x / maxX) * (W - pad.l - pad.r);
  const sy = (y: number) => H - pad.b - (y / maxY) * (H - pad.t - pad.b);
  const lines = series
    .map((s) => {
      const path = s.points
        .map((p, i) => `${i ? "L" : "M"}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`)
        .join(" ");
      const dots = s.points
        .map(
          (p) =>
            `<circle cx="${sx(p.x).toFixed(1)}" cy="${sy(p.y).toFixed(1)}" r="4"/><text x="${(sx(p.x) + 6).toFixed(1)}" y="${(sy(p.y) - 8).toFixed(1)}">${p.y}</text>`,
        )
        .join("");
      return `<path d="${path}" fill="none" stroke="${s.color}" stroke-width="2"/><g fill="${s.color}">${dots}</g>`;
    })
    .join("\n");
  const legend =
    series.length > 1
      ? series
          .map(
            (s, i) =>
              `<rect x="${pad.l + 12}" y="${pad.t + 4 + i * 18}" width="12" height="12" fill="${s.color}"/><text x="${pad.l + 30}" y="${pad.t + 14 + i * 18}">${s.name}</text>`,
          )
          .join("")
      : "";
  const ticks = [0, 0.25, 0.5, 0.75, 1]
    .map(
      (f) =>
        `<text x="${pad.l - 8}" y="${sy(maxY * f) + 4}" text-anchor="end">${Math.round(maxY * f)}</text>`,
    )
    .join("");
  const xs = [...new Set(all.map((p) => p.x))].sort((a, b) => a - b);
  const xticks = xs
    .map(
      (x) => `<text x="${sx(x)}" y="${H - pad.b + 18}" text-anchor="middle">${x.toLocaleString("en")}</text>`,
    )
    .join("");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<line x1="${pad.l}" y1="${H - pad.b}" x2="${W - pad.r}" y2="${H - pad.b}" stroke="#333"/>
<line x1="${pad.l}" y1="${pad.t}" x2="${pad.l}" y2="${H - pad.b}" stroke="#333"/>
${ticks}${xticks}
${lines}
${legend}
<text x="${(W + pad.l) / 2}" y="${H - 8}" text-anchor="middle">${xLabel}</text>
<text transform="translate(16 ${(H - pad.b) / 2}) rotate(-90)" text-anchor="middle">${yLabel}</text>
</svg>
`;
}

/** What each write a metered job makes beyond a plain job's is for (docs/design.md, "Usage and plans"). */
const METERED_WRITES = [
  "- `Reported` with both counts (the job's status, after the answer): the attempt leaves the outbox, its used and reported seconds marked counted in the same write, so no later pass adds them again;",
  "- the account's count (its BillingAccount's status, one write per batch of up to 100 events of a customer, so a fraction of a write per job): the period's usage that plans admit by, the batch's count ids listed in it so a crash before the jobs' writes adds nothing twice.",
  "",
  "Not a write more: the meter decision (`meter: Pending`, in the sidecar's write of the result); the start of the identifier's deduplication window (no stamp before the call: the leader keeps its first call in memory, and bounds an earlier leader's by the attempt's end, [the send rule](design.md#meter-events)); and the finalizer: the run's finalizer waits up to 30 s (`USAGE_SETTLE_WAIT_SECONDS`) for the report and then goes in one write, as on a plain job; only a report still waiting then hands over to `media-orchestrator.io/usage-report` (a write to put it in, in the one that lets go of the run's, and one to remove it): the share of jobs whose report waited that long is the `PATCH mediajobs` above 2 per job below, which grows with the reporter's backlog on a loaded machine.",
];

/** The writes a plain job makes, and why each is needed (docs/design.md). */
const PLAIN_WRITES = [
  "- the create (the user's);",
  "- the finalizer (a patch): a job deleted while it runs is cancelled at the provider before it goes, so no GPU runs for an object nobody sees;",
  "- the submission's intent (a status write before `/run`): at most once, since RunPod gives each `/run` an id of its own, so a job sent twice runs and bills twice: no intent written, no submission, and a submission whose answer was lost (a crash, a timeout) is adopted by its callback, never sent again ([Submission](design.md#submission));",
  "- Processing with the provider's id (a status write after `/run`): what the sidecar's callback, the status checks and a cancel address;",
  "- the Submitted Event: `kubectl describe` and `kubectl get events` show when and where a job went (written in the background, dropped first under pressure, as client-go's broadcaster does);",
  "- Completed (the sidecar's status write from the provider's callback): the result, its outputs and the provider's times;",
  "- the Completed Event (or Failed, Cancelled): how the job ended, for the same readers as Submitted;",
  "- the finalizer's removal (a patch): the finished job can be deleted (its TTL, or the user) without the controller.",
  "",
  "Not a write: the admission (the dispatcher's grant is in memory; a new leader counts the intents in the cache, [Fair share](design.md#fair-share)), the conditions (in the same status writes), the usage's meter decision (in Completed). The `409 Conflict` share is a write refused because another writer (the sidecar's callback racing Processing) wrote first; it is read again and written once more.",
];

export function writeReport(r: Json): void {
  const out: string[] = [
    "# Benchmarks",
    "",
    `Measured ${r.date} on a ${r.machine?.cores}-core machine (${r.machine?.memoryGiB ?? 24} GiB, Node ${r.machine?.node}) by \`make bench\`.`,
  ];
  out.push(
    "Raw numbers: [`bench/results/latest.json`](../bench/results/latest.json). Every number beside a ceiling measured in the same run.",
    "",
  );
  if (r.throughput) {
    out.push("## End-to-end job throughput", "");
    out.push(
      "N MediaJobs created at once; the controller submits them to the simulator (each job runs 250 ms at the provider, callbacks on), the sidecar applies the callbacks; the product's time runs until the last job's last write (its finalizer's removal and its Submitted Event included). The ceiling is a bare client making the same Kubernetes writes per job as the product, with the product's own statuses and Events (create, finalizer, the submission's intent, Processing with the provider's id, the Submitted Event, Completed, the Completed Event, finalizer removal: 8) at the same concurrency (`--concurrency`, 32 by default: 32 writers for the ceiling and the job creation, `MAX_CONCURRENT_RECONCILES=32` for the controller), against the same control plane, measured before and after the product; the better of the two is the ceiling. The second ratio is against the fewest writes any job needs (create, Processing, Completed: 3), measured once after. The product runs warm, as a controller that has been running does: a first batch of jobs (`--warmup`, 200) goes through the controller and the sidecar before the clock starts, and is not counted; what that batch cost the controller is its cold start, beside the warm figure below.",
      "",
    );
    out.push(
      "| jobs | product jobs/s | same-writes ceiling jobs/s | ratio | minimal-writes ceiling jobs/s | ratio to minimal | create→submitted p50 / p99 (ms) | submitted→completed p50 / p99 (ms) | executions per job | jobs without a recorded submission | controller CPU s | controller CPU ms per job |",
    );
    out.push("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // A size measured with `--only split` alone has no row here.
    for (const t of r.throughput.filter((t: Json) => t.createToSubmittedMs)) {
      out.push(
        `| ${t.jobs} | ${t.jobsPerSecond} | ${t.ceilingJobsPerSecond} (${t.ceilingWritesPerJob ?? t.writesPerJob ?? 6} writes) | ${t.ratio} | ${t.minimalCeilingJobsPerSecond ?? "not measured"} | ${t.ratioToMinimal ?? "not measured"} | ${t.createToSubmittedMs.p50} / ${t.createToSubmittedMs.p99} | ${t.submittedToCompletedMs.p50} / ${t.submittedToCompletedMs.p99} | ${t.executionsPerJob} | ${t.completedBeforeSubmissionRecorded ?? "not measured"} | ${t.controllerCpuSeconds} | ${t.controllerCpuMsPerJob ?? round2((1000 * t.controllerCpuSeconds) / t.jobs)} |`,
      );
    }
    out.push("", "A plain job's writes, and why each is needed:", "", ...PLAIN_WRITES, "");
    if (r.throughput.some((t: Json) => t.writesPerMeteredJob !== undefined)) {
      out.push(
        "Kubernetes writes per job, from the apiserver's own `apiserver_request_total` (creates, updates, patches and deletes of every resource, Events included, less the writes it refused with 409), over the whole run: a plain job's in the run above, and a metered job's in a second run of the product (`metered`: each job names a customer with an active BillingAccount, metering on against the simulator's payment API; the run lasts until every job's usage is reported, counted into the account and its finalizer off). A metered job's writes beyond a plain job's:",
        "",
        ...METERED_WRITES,
        "",
        "| jobs | writes per plain job | writes per metered job | metered run jobs/s | metered run controller CPU ms per job | apiserver per job, metered |",
        "|---:|---:|---:|---:|---:|---|",
      );
      for (const t of r.throughput)
        if (t.writesPerMeteredJob !== undefined)
          out.push(
            `| ${t.jobs} | ${t.writesPerJob} | ${t.writesPerMeteredJob} | ${t.metered?.jobsPerSecond} | ${t.metered?.controllerCpuMsPerJob} | ${Object.entries(
              t.metered?.apiserverRequestsPerJob ?? {},
            )
              .map(([k, v]) => `${k} ${String(v)}`)
              .join(", ")} |`,
          );
      out.push("");
    }
    if (r.throughput.some((t: Json) => t.controlPlaneCpuMsPerJob !== undefined)) {
      out.push(
        "Where the CPU went, per job (from /proc), and what the apiserver served per job (its own `apiserver_request_total` and `apiserver_watch_events_total`). Beside the controller's CPU, what its six writes per job (finalizer, intent, provider id, Submitted Event, Completed Event, finalizer removal) cost the ceiling's bare client in the same run: its CPU per write through the same client, times six. The control-plane cost ratio is the ceiling's control-plane CPU per job over the product's: the throughput ratio the product would reach if the control plane had its own cores, which here it shares with the controller, the sidecar and the simulator.",
        "",
        "| jobs | controller ms | controller ms, cold (the warm-up's jobs, the first after its start) | a bare client's ms for the controller's 6 writes | sidecar ms | control plane ms (product / ceiling) | control-plane cost ratio | apiserver per job, product | apiserver per job, ceiling |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|",
      );
      const served = (x: Record<string, number> | undefined) =>
        x
          ? Object.entries(x)
              .map(([k, v]) => `${k} ${v}`)
              .join(", ")
          : "not measured";
      for (const t of r.throughput)
        if (t.controlPlaneCpuMsPerJob !== undefined)
          out.push(
            `| ${t.jobs} | ${t.controllerCpuMsPerJob} | ${t.coldControllerCpuMsPerJob !== undefined ? `${t.coldControllerCpuMsPerJob} (${t.warmupJobs} jobs)` : "not measured"} | ${t.controllerWritesBareClientCpuMsPerJob ?? "not measured"} | ${t.sidecarCpuMsPerJob} | ${t.controlPlaneCpuMsPerJob} / ${t.ceilingControlPlaneCpuMsPerJob} | ${t.controlPlaneCostRatio} | ${served(t.apiserverRequestsPerJob)} | ${served(t.ceilingApiserverRequestsPerJob)} |`,
          );
      out.push("");
    }
    if (r.throughput.some((t: Json) => t.totalCpuMsPerJob !== undefined)) {
      out.push(
        "All the CPU one job took on this machine (ms): the product's control plane, controller, sidecar and this benchmark's process (the job creation and the in-process provider simulator), against the ceiling's control plane and bare client. On two shared cores the throughput ratio follows the ratio of these totals.",
        "",
        "| jobs | product: control plane + controller + sidecar + simulator and creation = total | ceiling: control plane + client = total |",
        "|---:|---|---|",
      );
      for (const t of r.throughput)
        if (t.totalCpuMsPerJob !== undefined)
          out.push(
            `| ${t.jobs} | ${t.controlPlaneCpuMsPerJob} + ${t.controllerCpuMsPerJob} + ${t.sidecarCpuMsPerJob} + ${t.driverCpuMsPerJob} = ${t.totalCpuMsPerJob} | ${t.ceilingControlPlaneCpuMsPerJob} + ${t.ceilingDriverCpuMsPerJob} = ${t.ceilingTotalCpuMsPerJob} |`,
          );
      out.push("");
    }
    if (r.throughput.some((t: Json) => t.splitCores)) {
      out.push(
        "With the control plane on a core of its own (`--split-cores`: the apiserver and etcd pinned to core 0, the controller, the sidecar, the simulator and the bare client to core 1, as in a cluster where the operator runs on a worker node and never takes the apiserver's CPU). The runs alternate, ceiling, product, ceiling, product, ceiling: each product run is compared with the ceiling runs on either side of it, and the ratio is the mean of those pairs. Beside it, the mean product run against the best ceiling run.",
        "",
        "The watched ceiling makes the same writes with a watch open on them, as the controller's informer is: the apiserver sends it each write's event. It says how much of the gap is the watch every controller holds, and how much is the product's own work.",
        "",
        "| jobs | product jobs/s (runs) | same-writes ceiling jobs/s (runs) | ratio (pairs) | ratio to the best ceiling run | watched ceiling jobs/s | ratio to it | control plane ms per job (product / ceiling / watched) | controller ms per job | sidecar ms per job | product writes per job | executions per job |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
      );
      for (const t of r.throughput)
        if (t.splitCores) {
          const x = t.splitCores;
          out.push(
            `| ${t.jobs} | ${x.jobsPerSecond} (${(x.productRunsJobsPerSecond ?? [x.jobsPerSecond]).join(", ")}) | ${x.ceilingJobsPerSecond} (${(x.ceilingRunsJobsPerSecond ?? []).join(", ")}) | ${x.ratio} (${(x.pairRatios ?? []).join(", ")}) | ${x.ratioToBestCeiling ?? "–"} | ${x.watchedCeilingJobsPerSecond ?? "–"} | ${x.ratioToWatchedCeiling ?? "–"} | ${x.controlPlaneCpuMsPerJob} / ${x.ceilingControlPlaneCpuMsPerJob} / ${x.watchedCeilingControlPlaneCpuMsPerJob ?? "–"} | ${x.controllerCpuMsPerJob} | ${x.sidecarCpuMsPerJob} | ${x.writesPerJob ?? "–"} | ${x.executionsPerJob} |`,
          );
        }
      out.push("");
    }
  }
  if (r.intake) {
    const i = r.intake;
    out.push(
      "## Sidecar intake",
      "",
      `autocannon, 20 connections, 10 s per case, against the sidecar process; new events in ${i.newEvents.rounds?.length ?? 3} rounds of ${i.newEvents.roundSeconds ?? 5} s${i.newEvents.warmupSeconds ? ` after a ${i.newEvents.warmupSeconds} s warm-up of each side` : ""}, each beside the apiserver's ceilings of the moment (a bare client, 20 writers, ${i.newEvents.roundSeconds ?? 5} s each; every other round in the reverse order). ` +
        "The capacity rows run with the rate limits raised out of the way (`WEBHOOKS_RATE_LIMITS`), so they measure the sidecar; " +
        "the last row runs with a route limit below the sidecar's capacity and shows the shedding. `ok/s` counts 2xx answers only; `shed/s` counts 429s.",
      "",
    );
    out.push(
      "| case | answers/s | ok/s | shed/s | p50 / p99 ms | answers | Kubernetes writes |",
      "|---|---:|---:|---:|---:|---|---|",
    );
    const row = (
      label: string,
      x: {
        requestsPerSecond: number;
        okPerSecond?: number;
        shedPerSecond?: number;
        p50Ms?: number;
        p99Ms: number;
        statusCodes: unknown;
      },
      writes: string,
    ) =>
      `| ${label} | ${x.requestsPerSecond} | ${x.okPerSecond ?? "not measured"} | ${x.shedPerSecond ?? "not measured"} | ${x.p50Ms ?? "?"} / ${x.p99Ms} | ${JSON.stringify(x.statusCodes)} | ${writes} |`;
    out.push(
      row(
        "new payment events",
        i.newEvents,
        `${i.newEvents.kubernetesWritesPerRequest} per event; ${i.newEvents.ratioToApiserverWrites ?? "?"} of the apiserver's ${i.apiserverWritesPerSecond} writes/s (ConfigMap creates), ${i.newEvents.ratioToPaymentEventCreates ?? "?"} of its ${i.newEvents.paymentEventCreatesPerSecond ?? "?"} PaymentEvent creates/s${i.newEvents.medianRoundRatioToApiserverWrites !== undefined ? ` (median round: ${i.newEvents.medianRoundRatioToApiserverWrites} of the writes/s)` : ""}; sidecar CPU ${i.newEvents.sidecarCpuMsPerEvent ?? "?"} ms per event`,
      ),
    );
    out.push(row("replays of one event", i.replays, `${i.replays.kubernetesWrites} (answered from memory)`));
    out.push(row("bad signatures", i.badSignatures, "0 (rejected before any read)"));
    out.push(row("duplicate GPU callbacks", i.duplicateCallbacks, "0 (one read, no write)"));
    if (i.shedding)
      out.push(row(`new payment events, ${i.shedding.limits}`, i.shedding, "1 per answered event"));
    out.push("");
  }
  if (r.recovery) {
    const x = r.recovery;
    out.push(
      "## Recovery latency",
      "",
      `${x.jobs} jobs whose callbacks were all dropped (${x.droppedCallbacks} dropped); job timeout ${x.timeoutSeconds} s, tick ${x.tickSeconds} s. From submission to Completed (the provider finished each job within ~10 ms):`,
      "",
    );
    out.push(
      `p50 ${x.p50Ms} ms, p99 ${x.p99Ms} ms, max ${x.maxMs} ms: the timeout plus at most the time to the next check.`,
      "",
    );
  }
  if (r.fairness) {
    const f = r.fairness;
    const sc = f.scenario ?? {};
    const on = f.windowOn ?? {};
    const off = f.windowOff ?? {};
    const target = (ok: boolean) => (ok ? "met" : "**missed**");
    const bTarget = 2 * f.jobSeconds * 1000 + f.tickSeconds * 1000;
    out.push(
      "## Fair share at the provider",
      "",
      `One endpoint of ${sc.workersMax} workers (QUEUE_DELAY scaler, from 0 workers), each job ${f.jobSeconds} s of simulated work in real time. Account A creates ${sc.aJobs} jobs at once, account C (weight 2) ${sc.cJobs} right after, account B one job every ${sc.bIntervalMs} ms, as many as the endpoint needs time for the bursts (${f.windowOn?.smallAccountJobs}). The same scenario twice in the same run: with the in-flight window (the product) and without it (\`FAIR_SHARE_WINDOW=false\`, every job submitted at once). Times are the simulator's own record of each job (submitted, started, ended at the provider). B's start: from the MediaJob's creation to the provider starting it. Shares: worker time of the jobs of A and C started while both had jobs waiting, against 1:2 (share error: the largest relative deviation). Utilisation: busy worker time over workersMax × the span from the first start to the last end. Makespan: from the first creation to the last end. The defaults of \`--only fairness\` are A 5,000 and C 2,000 jobs (\`--fairness-a\`, \`--fairness-c\`, \`--fairness-workers\`, \`--fairness-job-seconds\`); B's rate, 2 jobs a second, must stay under its fair share of the endpoint (a quarter of workersMax / job seconds) for its wait to be bounded, hence 30 workers for 2-second jobs.`,
      "",
      "| measure | window on | window off | target |",
      "|---|---:|---:|---|",
      `| B's start p50 (ms) | ${on.smallAccountStartP50Ms} | ${off.smallAccountStartP50Ms} | |`,
      `| B's start p99 (ms) | ${on.smallAccountStartP99Ms} | ${off.smallAccountStartP99Ms} | < 2 × job + tick = ${bTarget}: ${target(on.smallAccountStartP99Ms < bTarget)} |`,
      `| shares A : C | ${on.shareA} : ${on.shareC} | ${off.shareA} : ${off.shareC} | 0.333 : 0.667 |`,
      `| share error | ${on.shareError} | ${off.shareError} | ≤ 0.1: ${target(on.shareError <= 0.1)} |`,
      `| utilisation | ${on.utilisation} | ${off.utilisation} | ≥ 0.95: ${target(on.utilisation >= 0.95)} |`,
      `| makespan (s) | ${on.makespanSeconds} | ${off.makespanSeconds} | ratio ${f.makespanRatio}, ≤ 1.05: ${target(f.makespanRatio <= 1.05)} |`,
      `| most workers up | ${on.peakWorkers} | ${off.peakWorkers} | ${sc.workersMax} |`,
      `| provider 429s | ${on.provider429} | ${off.provider429} | 0: ${target(on.provider429 === 0)} |`,
      `| Kubernetes writes per job | ${on.kubernetesWritesPerJob} | ${off.kubernetesWritesPerJob} | at most 1 more |`,
      "",
    );
  }
  if (r.dispatch) out.push(...dispatchSection(r.dispatch));
  if (r.cost) out.push(...costSection(r.cost));
  if (r.storage) out.push(...storageSection(r.storage));
  if (r.metering) {
    const x = r.metering;
    const v1 = r.meteringOneCallPerEvent;
    const row = (how: string, m: Json) =>
      `| ${how} | ${m.jobs.toLocaleString("en")} | ${m.secondsToMetered} | ${m.secondsToRecorded} | ${m.meterCalls.v1Events} | ${m.meterCalls.v2StreamBatches} | ${m.meterCalls.requests} | ${m.identifiersRecordedTwice} | ${m.valueMismatches} |`;
    out.push(
      "## Metering a burst",
      "",
      `One customer's ${x.jobs.toLocaleString("en")} ended jobs, each one attempt's usage waiting in the outbox, metered by the controller against the simulator's payment API, whose every meter call (a v1 event, a v2 stream batch) takes ${x.meterCallLatencyMs} ms (Stripe answers in about 100-300 ms). From the controller's start until every attempt is \`Reported\` (the backlog is 0), and until the provider had recorded every event (\`tsx bench/run.ts --only metering\`):`,
      "",
      "| reporter | jobs | s to metered | s to recorded | v1 event calls | v2 stream calls | payment API requests | identifiers recorded twice | values wrong |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
      ...(v1 ? [row("one v1 call per event (before the stream)", v1)] : []),
      row("v2 stream, batches of up to 100", x),
      "",
    );
  }
  if (r.rest) {
    const x = r.rest;
    out.push(
      "## At rest",
      "",
      `${x.endpoints} Ready GpuEndpoints and ${x.jobs} finished MediaJobs (run through the whole stack, callbacks on), nothing else to do; tick ${x.tickSeconds} s. Counted over ${x.windowSeconds} s after two quiet ticks: Kubernetes writes as the apiserver reports them (watches on every resource the product writes in its namespace), provider requests as the simulator counts them, the controller's CPU from /proc.`,
      "",
      "| measure | value | target |",
      "|---|---:|---:|",
      `| Kubernetes writes/s | ${x.kubernetesWritesPerSecond} | ${x.targets.kubernetesWritesPerSecond} |`,
      `| provider requests/s | ${x.providerRequestsPerSecond} | |`,
      `| provider requests per endpoint per tick | ${x.providerRequestsPerEndpointPerTick} | ≤ ${x.targets.providerRequestsPerEndpointPerTick} |`,
      `| controller CPU, % of a core | ${x.controllerCpuPercent} | < ${x.targets.controllerCpuPercent} |`,
      `| sidecar CPU, % of a core | ${x.sidecarCpuPercent} | |`,
      "",
      `Provider requests by route: \`${JSON.stringify(x.providerRequestsByRoute)}\`.`,
      "",
    );
  }
  if (r.footprint) {
    const f = r.footprint;
    const m = f.measured ?? {};
    const met = (v: number, max: number) =>
      v <= max ? `${v} (target ≤ ${max}: met)` : `**${v}** (target ≤ ${max}: missed)`;
    out.push(
      "## Footprint of the containers",
      "",
      `What the image runs, measured by \`make bench BENCH_ARGS="--only footprint"\`: dist/ compiled by tsc, each container started with the image's command (\`${m.command ?? "node dist/src/main.js"}\`) and environment (\`${m.environment ?? ""}\`), in-cluster: in a mount namespace where the service account's token and CA sit at /var/run/secrets/kubernetes.io/serviceaccount, with KUBERNETES_SERVICE_HOST/PORT naming the apiserver, as in a pod. Idle: the median of 5 RSS readings a second apart from 10 s after start (the controller once its cache holds every job and its queue is empty), the median of ${m.starts ?? 3} starts. Peak: the kernel's high-water mark of the process (VmHWM) over the load named. Beside them the chart's default requests and limits (deploy/helm/values.yaml).`,
      "",
      "| container | idle RSS MiB | with 10,000 jobs cached MiB | peak MiB | chart request MiB | chart limit MiB |",
      "|---|---:|---:|---:|---:|---:|",
      `| controller (idle: 1,000 jobs cached) | ${met(f.controller.idleMiB, f.targets?.idleMiB ?? 80)} | ${met(f.controller.jobs10kMiB, f.targets?.controllerJobs10kMiB ?? 100)} | ${f.controller.peakMiB} | ${f.controller.requestMiB} | ${f.controller.limitMiB} |`,
      `| webhooks | ${met(f.webhooks.idleMiB, f.targets?.idleMiB ?? 80)} | | ${f.webhooks.peakMiB} | ${f.webhooks.requestMiB} | ${f.webhooks.limitMiB} |`,
      "",
    );
    const c = m.controller ?? {};
    const w = m.webhooks ?? {};
    if (c.jobs1k && w.intake)
      out.push(
        "Peaks by load (VmHWM, MiB) and where the idle memory is:",
        "",
        "| load | controller | webhooks |",
        "|---|---:|---:|",
        `| start and first pass, 1,000 / 10,000 jobs cached | ${c.jobs1k.startupPeakMiB} / ${c.jobs10k.startupPeakMiB} | |`,
        `| ${c.burst.jobs.toLocaleString("en")} jobs run end to end beside 10,000 cached (${c.burst.seconds} s; the sidecar applies the callbacks${c.burst.cpuMsPerJob === undefined ? "" : `; CPU per job: controller ${c.burst.cpuMsPerJob} ms, sidecar ${w.burstCpuMsPerJob} ms`}) | ${c.burst.peakMiB} | ${w.burstPeakMiB} |`,
        `| the intake benchmark's load: new signed events (${w.intake.newEventsPerSecond}/s, ${w.intake.sidecarCpuMsPerEvent} ms of CPU each), replays, bad signatures, duplicate callbacks, 20 connections | | ${w.intake.peakMiB} |`,
        `| a fuzz-shaped load: ${w.fuzz.requests.toLocaleString("en")} requests of \`make fuzz\`'s kinds (nested, huge, malformed bodies; 30 % of payments signed), 32 at a time, ${w.fuzz.requestsPerSecond}/s | | ${w.fuzz.peakMiB} |`,
        `| idle RSS: anonymous (V8 heap, malloc) / file-backed (the node binary's pages) | ${c.jobs1k.anonymousMiB ?? "?"} / ${c.jobs1k.fileMiB ?? "?"} | ${w.anonymousMiB ?? "?"} / ${w.fileMiB ?? "?"} |`,
        `| idle RSS of each start | ${(c.jobs1k.rssRunsMiB ?? []).join(", ")} (10,000: ${(c.jobs10k.rssRunsMiB ?? []).join(", ")}) | ${(w.idleRunsMiB ?? []).join(", ")} |`,
        "",
      );
    if (c.jobs1k?.fileMiB !== undefined && w.fileMiB !== undefined) {
      const target = f.targets?.idleMiB ?? 80;
      out.push(
        `Where the idle memory is: a bare Node 24 process started the same way holds ${f.importCosts?.[0]?.rssMiB ?? "about 45"} MiB, most of it the pages of the node binary it runs (file-backed: shared by every process of the same binary, given back by the kernel under pressure, but counted in RSS). Idle, the controller's RSS is ${c.jobs1k.fileMiB} MiB file-backed and ${c.jobs1k.anonymousMiB} MiB anonymous (the V8 heap, malloc, stacks), the sidecar's ${w.fileMiB} and ${w.anonymousMiB}: the code each loads touches more of the binary (V8's compilers, OpenSSL for the apiserver's TLS), so ${target} MiB would leave the controller ${round2(target - c.jobs1k.fileMiB)} MiB and the sidecar ${round2(target - w.fileMiB)} MiB of anonymous memory, against the ${c.jobs1k.anonymousMiB} and ${w.anonymousMiB} MiB they hold idle.`,
        "",
      );
    }
    if (m.packages)
      out.push(
        `Packages each container loads (node_modules, from its code's import graph): controller ${m.packages.controller.map((p: string) => `\`${p}\``).join(", ")}; webhooks ${m.packages.webhooks.map((p: string) => `\`${p}\``).join(", ")}. Neither loads \`@kubernetes/client-node\` in a cluster (the benchmark fails if one does).`,
        "",
      );
    out.push(
      "The runtime flags measured one by one, kept or not, and what each saved: [Runtime flags measured](#runtime-flags-measured).",
      "",
    );
    if (f.importCosts) {
      const loadedBy = (pkg: string) =>
        [
          m.packages?.controller?.includes(pkg) ? "controller" : "",
          m.packages?.webhooks?.includes(pkg) ? "webhooks" : "",
        ]
          .filter(Boolean)
          .join(", ") || "neither (in a cluster)";
      out.push(
        "## Import costs",
        "",
        "What importing each package costs a fresh Node process started with the image's flags and environment: RSS after the import and a memory-reducing collection, less a bare process's (first row), the median of 3 starts. The costs overlap (much of each is the node binary's own pages, touched by the first package that needs them), so they do not add up.",
        "",
        "| package | RSS MiB | import ms | loaded by |",
        "|---|---:|---:|---|",
        ...f.importCosts.map((x: Json) =>
          x.package === "(node alone)"
            ? `| Node alone | ${x.rssMiB} | | |`
            : `| \`${x.package}\` | +${x.rssMiB} | ${x.ms} | ${loadedBy(x.package)} |`,
        ),
        "",
      );
    }
  }
  if (r.scale) {
    const sc = r.scale;
    const table = (points: Json[]) => [
      "| jobs | RSS MiB, settled | RSS MiB, 3 s after the pass | heap after GC MiB | V8 heap committed MiB | list+sync s | first pass ms | mean reconcile ms | CPU s |",
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
      ...points.map(
        (p) =>
          `| ${p.jobs} | ${p.rssMiB} | ${p.rssFirstReadMiB ?? "not measured"} | ${p.heapUsedMiB ?? "not measured"} | ${p.heapTotalMiB ?? "not measured"} | ${p.syncSeconds} | ${p.resyncPassMs} | ${p.reconcileMeanMs} | ${p.cpuSeconds} |`,
      ),
    ];
    const target = (value: number, max: number | undefined) =>
      max === undefined
        ? ""
        : value <= max
          ? ` (target ≤ ${max} KiB: met)`
          : ` (target ≤ ${max} KiB: missed)`;
    out.push(
      "## Memory and scaling",
      "",
      "Finished MediaJobs in the cache; the controller started fresh at each size, measured after the first full reconcile pass. RSS settled: the median of 5 readings a second apart from 10 s after the pass, as `kubectl top` shows it once the controller is idle (nothing is done to the process); beside it the single reading 3 s after the pass. Each size is measured on 3 fresh starts and the start with the median settled RSS is shown.",
      "",
      ...table(sc.points),
      "",
      `Per-job memory cost: **${sc.perJobKiB} KiB** of settled RSS (slope between the smallest and largest size)` +
        target(sc.perJobKiB, sc.targets?.perFinishedJobKiB) +
        (sc.perJobFirstReadKiB !== undefined
          ? `; ${sc.perJobFirstReadKiB} KiB of RSS read 3 s after the pass`
          : "") +
        (sc.perJobHeapKiB !== undefined
          ? `; **${sc.perJobHeapKiB} KiB** of heap after a full collection (bench/gc-probe.ts), what each cached job retains`
          : "") +
        (sc.perJobAfterGcKiB !== undefined
          ? `; **${sc.perJobAfterGcKiB} KiB** of RSS read after that collection (a memory-reducing one)` +
            target(sc.perJobAfterGcKiB, sc.targets?.perFinishedJobKiB) +
            "."
          : "."),
    );
    if (sc.segments?.length > 1)
      out.push(
        "",
        "By segment: " +
          sc.segments
            .map(
              (g: Json) =>
                `${g.from.toLocaleString("en")} → ${g.to.toLocaleString("en")}: ${g.rssKiB} KiB of RSS, ${g.heapKiB} KiB of heap per job`,
            )
            .join("; ") +
          ".",
      );
    if (sc.active) {
      out.push(
        "",
        "### Active jobs",
        "",
        "Processing MediaJobs in the cache (finalizer on, submission accepted, an hour before they count as stuck), each reconciled once by the first pass and then waiting in the work queue; the controller started fresh at each size.",
        "",
        ...table(sc.active.points),
        "",
        `Per active job: **${sc.active.perJobKiB} KiB** of settled RSS` +
          target(sc.active.perJobKiB, sc.targets?.perActiveJobKiB) +
          (sc.active.perJobFirstReadKiB !== undefined
            ? `; ${sc.active.perJobFirstReadKiB} KiB of RSS read 3 s after the pass`
            : "") +
          `; **${sc.active.perJobHeapKiB} KiB** of heap after a full collection` +
          (sc.active.perJobAfterGcKiB !== undefined
            ? `; **${sc.active.perJobAfterGcKiB} KiB** of RSS read after it` +
              target(sc.active.perJobAfterGcKiB, sc.targets?.perActiveJobKiB) +
              "."
            : "."),
      );
    }
    out.push("", "![RSS against cached MediaJobs](benchmarks/memory.svg)", "");
    mkdirSync(join(REPO_ROOT, "docs/benchmarks"), { recursive: true });
    const series: Series[] = [
      {
        name: "finished jobs",
        color: "#2563eb",
        points: sc.points.map((p: Json) => ({ x: p.jobs, y: p.rssMiB })),
      },
    ];
    if (sc.active)
      series.push({
        name: "active jobs",
        color: "#dc2626",
        points: sc.active.points.map((p: Json) => ({ x: p.jobs, y: p.rssMiB })),
      });
    writeFileSync(
      join(REPO_ROOT, "docs/benchmarks/memory.svg"),
      lineChart(series, "MediaJobs in the cache", "controller RSS (MiB)"),
    );
  }
  out.push(
    "What these numbers mean, target by target, and how each was measured: " +
      "[benchmarks-notes.md](benchmarks-notes.md).",
  );
  writeFileSync(join(REPO_ROOT, "docs/benchmarks.md"), `${fitMarkdown(out.join("\n"))}\n`);
}

/** Media through the object store and the stage cache (bench/storage.ts). */
function storageSection(x: Json): string[] {
  const row = (what: string, r: Json) =>
    `| ${what} | ${r.seconds} | ${r.providerSubmissions} | ${r.billedWorkerSeconds} | ${r.cacheHits} | ${r.completedSteps} / ${r.failedSteps} | ${r.meanCompletedJobBytes} |`;
  return [
    "## Media through the object store, and the stage cache",
    "",
    `${x.pipelines} three-step pipelines (asr -> tts -> render, each step's file stored through its presigned PUT and ` +
      "checked in the store before the step is Completed), created at once, whose render fails; then the same " +
      `pipelines again with the render fixed (\`make bench BENCH_ARGS="--only storage"\`, \`bench/storage.ts\`: the ` +
      "controller in the benchmark's process against the local control plane, the simulator over HTTP, a real S3 " +
      "server). Provider submissions are the simulator's own count of /run calls; worker-seconds its billing " +
      "ledger. Target: the re-run submits only the failed stage " +
      `(${x.pipelines} submissions): ${x.saved?.rerunSubmitsOnlyTheFailedStage ? "met" : "missed"}.`,
    "",
    "| run | seconds | provider submissions | billed worker-s | cache hits | steps completed / failed | completed job, bytes as cached |",
    "|---|---:|---:|---:|---:|---:|---:|",
    row("first (render fails)", x.first),
    row("again (render fixed)", x.rerun),
    "",
    `A presigned URL costs ${x.presignCpuMicrosPerUrl} µs of CPU to mint (one attempt's GET and PUT, minted 2,000 ` +
      "times). A completed job keeps its outputs as references (key, size, digest), so its cached object " +
      "weighs what the table says whatever the size of its media.",
    "",
  ];
}

/** The pricing rules' scenarios (bench/cost-scenarios.ts): one row per scenario and customer. */
function costSection(c: Json): string[] {
  const usd = (micros: number) => `$${(micros / 1e6).toFixed(4)}`;
  const rows = ((c.scenarios ?? []) as Json[]).flatMap((s: Json) => [
    `| ${s.name} | all | ${usd(s.providerCostMicros)} (${s.providerWorkerSeconds} worker-s; ${usd(s.unallocatedMicros)} unallocated) | ` +
      `${usd(s.providerCostMicros - s.unallocatedMicros)} | ${usd(s.total.execution.meteredMicros)} | ${s.total.execution.recovery} | ` +
      `${usd(s.total.workerCost.meteredMicros)} | ${s.total.workerCost.recovery} |`,
    ...(s.customers as Json[]).map(
      (x: Json) =>
        `| | ${x.customer} (${x.jobs} jobs, ${x.executionSeconds} s metered) | | ${usd(x.allocatedMicros)} | ` +
        `${usd(x.execution.meteredMicros)} | ${x.execution.recovery} | ${usd(x.workerCost.meteredMicros)} | ${x.workerCost.recovery} |`,
    ),
  ]);
  return [
    "## What each pricing rule recovers",
    "",
    'The GPU provider\'s bill against what each customer is metered (`make bench BENCH_ARGS="--only cost"`, ' +
      "`bench/cost-scenarios.ts`). The simulator runs the jobs through its job API and bills worker time as RunPod " +
      "documents it (cold start, execution, idle timeout 5 s, rounded up per worker run), served as RunPod's billing " +
      "history; the product's own functions allocate its hourly buckets (`src/billing/cost-allocation.ts`) and meter " +
      "them (`execution`: `billableSeconds` at the provider's price of a GPU second, the price a team charging cost " +
      "per second would set; worker cost: `src/billing/worker-cost.ts`). Jobs of 2 s; simulated time " +
      `${1 / (c.timeScale ?? 0.01)}× real time. Recovery: metered over allocated (per customer) or over the ` +
      "provider's whole bill (all). See [design](design.md#pricing-rules).",
    "",
    "| scenario | customer | provider cost | allocated | `execution` metered | recovery | worker cost metered | recovery |",
    "|---|---|---:|---:|---:|---:|---:|---:|",
    ...rows,
    "",
    "What the rows say: metering execution seconds at cost price recovers a fraction of a sparse customer's bill " +
      "(its every job pays a cold start and an idle tail at the provider) and slightly more than a saturated " +
      "burst's (each attempt's seconds are rounded up, the provider's worker runs are rounded once); the worker-cost " +
      "rule recovers what was allocated, exactly. The allocation's grain is the provider's: an hourly bucket is " +
      "shared by execution time, so inside one hour a sparse customer's cold starts are shared with whoever else ran " +
      "(the mixed scenario), and an hour with no job in it stays unallocated.",
    "",
  ];
}

/** The dispatch scenarios (bench/dispatch.ts): one row per scenario and QUEUE_DELAY reading. */
function dispatchSection(d: Json): string[] {
  const st = d.setup ?? {};
  const s = (x: number | null | undefined) => (x === null || x === undefined ? "never" : String(x));
  const pair = (p: Json | null | undefined) => (p ? `${s(p.on)} / ${s(p.off)}` : "");
  const rows = (d.scenarios ?? []) as Json[];
  const missed = rows.flatMap((row: Json) =>
    (row.targets ?? [])
      .filter((t: Json) => !t.met)
      .map((t: Json) => `- ${row.name} (${row.reading}): ${t.target}: missed${t.note ? `; ${t.note}` : ""}.`),
  );
  return [
    "## Dispatch on a virtual clock",
    "",
    'The in-flight window replayed against what scales the endpoint (`make bench BENCH_ARGS="--only dispatch"`): the ' +
      "simulator's own engine, autoscaler and clock (`tools/simulator`) and the product's own `Dispatcher` with its " +
      "window and fair-share rules (`src/controller/dispatch`, `src/mediajob/window.ts`), driven by a stand-in of the " +
      "MediaJob loop (`bench/dispatch-driver.ts`: the informer's events, the gate of each pass, the submission with " +
      "the provider's policy, the callback's status write, the start-deadline check, the GpuEndpoint's look at " +
      "`/health` each tick). Time is virtual (`@sinonjs/fake-timers` replaces the timers and the date while a " +
      "replay runs), so 2,000 jobs of 30 s replay in seconds and a seed repeats exactly; Kubernetes is not in the " +
      "loop, the other benchmarks measure it. Each scenario runs with the window on (the product) and off " +
      "(`FAIR_SHARE_WINDOW=false`: every job submitted at once), under both readings of RunPod's `QUEUE_DELAY` " +
      "scaler (`perOverdueJob`, `onePerDelay`). Endpoint: workersMin 0, idle timeout " +
      `${st.idleTimeoutSeconds ?? 5} s, cold start 10 s (±20 %), jobs ±20 % of their length; the controller at its ` +
      `defaults (tick ${st.resyncSeconds ?? 30} s, \`FAIR_SHARE_TICK_SECONDS\` ${st.fairShareTickSeconds ?? 2}, ` +
      `\`FAIR_SHARE_JOB_SECONDS\` ${st.fairShareJobSeconds ?? 30}); seed ${st.seed ?? 1}. Drain: from the start ` +
      "to the last job's end. workersMax: seconds from the start (from the raise in the raise scenario) until " +
      "workersMax workers were up. Normal jobs: from their creation to the last one's end.",
    "",
    "| scenario | reading | drain on / off (s) | ratio | workersMax after on / off (s) | normal jobs on / off (s) | completed on / off | StartDeadlineExceeded on / off | targets |",
    "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (row: Json) =>
        `| ${row.name} | ${row.reading} | ${s(row.drainSecondsOn)} / ${s(row.drainSecondsOff)} | ${s(row.ratio)} | ` +
        `${pair(row.secondsToWorkersMax)} | ${pair(row.normalJobsDoneSeconds)} | ${pair(row.completed)} of ${row.of} | ` +
        `${pair(row.startDeadlineExceeded)} | ` +
        `${(row.targets ?? []).every((t: Json) => t.met) ? "met" : `**${(row.targets ?? []).filter((t: Json) => !t.met).length} missed**`} |`,
    ),
    "",
    "Targets: drain with the window on within 5 % of off; workersMax reached within one tick of the off run (where " +
      "the scenario's normal jobs can keep workersMax busy); the low-priority scenario's normal jobs done within " +
      "2 × (cold start + job) of the off run; every job completes once, none lost or stuck, except in the " +
      "crash-loop scenario, where each job completes after the recovery or ends `StartDeadlineExceeded`.",
    "",
    ...(missed.length
      ? [
          "Targets missed (read in [benchmarks-notes.md](benchmarks-notes.md#the-dispatch-scenarios-read)):",
          "",
          ...missed,
          "",
        ]
      : []),
  ];
}

// `tsx bench/report.ts` re-renders the page from the last results.
if (process.argv[1]?.endsWith("report.ts")) {
  writeReport(JSON.parse(readFileSync(join(REPO_ROOT, "bench/results/latest.json"), "utf8")) as Json);
}
