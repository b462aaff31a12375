// What one cached MediaJob costs, and which per-job state the controller keeps besides the cache:
// heap after a full collection, in a fresh process per case, for N objects shaped exactly as the
// apiserver sends them (one finished job is created and listed on the local control plane and used
// as the template, managedFields included). Read with `make bench` results in docs/benchmarks.md.
//   node --expose-gc --import tsx bench/cache-cost.ts [--jobs 20000]
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { API_VERSION } from "../src/crds/index.js";
import { MediaJob } from "../src/crds/mediajob.js";
import { KubeApi } from "../src/k8s/api.js";
import { EventRecorder } from "../src/k8s/events.js";
import { FINALIZER } from "../src/mediajob/job.js";
import { activeJobStatus, finishedJobStatus } from "./jobs.js";
import { trimMediaJob } from "../src/controller/cache-transform.js";
import { stripMetadata } from "../src/runtime/strip-metadata.js";
import { OwnWrites } from "../src/runtime/own-writes.js";
import { StaleCacheGuard } from "../src/runtime/stale-cache.js";
import { WorkQueue } from "../src/runtime/workqueue.js";

const { values: args } = parseArgs({
  options: {
    jobs: { type: "string", default: "20000" },
    case: { type: "string" },
    template: { type: "string" },
  },
});
const N = Number(args.jobs);
const gc = (globalThis as { gc?: () => void }).gc;
const PAGE = 500;

/** The cases: the cache with each transform, and each other holder of per-job state. */
const CASES = [
  "cache: untrimmed",
  "cache: stripMetadata",
  "cache: trimMediaJob, finished job not settled (input and steps dropped)",
  "cache: trimMediaJob, settled job (the record)",
  "active job: cache (trimMediaJob)",
  "active job: work queue (each waiting on its requeue-after timer)",
  "stale-cache guard (3 writes per job)",
  "own writes (recorded, then claimed by their events)",
  "event series (one Submitted Event per job)",
  "work queue (each job added and processed once)",
] as const;

function afterGc(): NodeJS.MemoryUsage {
  gc!();
  gc!();
  return process.memoryUsage();
}

/** One list page as the apiserver writes it: N copies of the template with their own identity. */
function page(template: string, from: number, count: number): string {
  const items: string[] = [];
  for (let i = from; i < from + count; i++) {
    const uid = `0000${i}`.padStart(8, "0") + "-1d2c-4b5a-9e8f-7a6b5c4d3e2f";
    items.push(
      template
        .replaceAll("__NAME__", `s-${i}`)
        .replaceAll("__UID__", uid)
        .replaceAll("__RV__", String(100000 + i)),
    );
  }
  return `{"kind":"MediaJobList","apiVersion":"${API_VERSION}","metadata":{"resourceVersion":"1"},"items":[${items.join(",")}]}`;
}

async function runCase(name: string, template: string): Promise<void> {
  const keep: unknown[] = [];
  const before = afterGc();
  if (name.startsWith("cache:") || name === "active job: cache (trimMediaJob)") {
    const transform: (j: MediaJob) => MediaJob =
      name === "cache: untrimmed"
        ? (j) => j
        : name === "cache: stripMetadata"
          ? (j) => stripMetadata(j)
          : name.includes("not settled")
            ? (j) => trimMediaJob({ ...j, status: { ...j.status, observedGeneration: 0 } })
            : trimMediaJob;
    const cache = new Map<string, MediaJob>();
    for (let from = 0; from < N; from += PAGE) {
      const parsed = JSON.parse(page(template, from, Math.min(PAGE, N - from))) as { items: unknown[] };
      for (const raw of parsed.items) {
        const job = transform(MediaJob.parse(raw));
        cache.set(`${job.metadata.namespace}/${job.metadata.name}`, job);
      }
    }
    keep.push(cache);
  } else if (name.startsWith("stale-cache")) {
    const guard = new StaleCacheGuard();
    for (let i = 0; i < N; i++) {
      const key = `bench-scale/s-${i}`;
      const rv = 100000 + i * 4;
      for (let w = 0; w < 3; w++) guard.remember(key, String(rv + w), String(rv + w + 1));
    }
    keep.push(guard);
  } else if (name.startsWith("own writes")) {
    const own = new OwnWrites();
    for (let i = 0; i < N; i++) {
      const obj = { metadata: { name: `s-${i}`, namespace: "bench-scale", resourceVersion: String(i) } };
      own.record(obj);
      own.claim(obj);
    }
    keep.push(own);
  } else if (name.startsWith("event series")) {
    const api = { rawJson: () => Promise.resolve({}) } as unknown as KubeApi;
    const silent = { warn: () => undefined } as never;
    const recorder = new EventRecorder(api, "controller", silent);
    for (let i = 0; i < N; i++)
      await recorder.record(
        {
          apiVersion: API_VERSION,
          kind: "MediaJob",
          metadata: { name: `s-${i}`, namespace: "bench-scale", uid: `uid-${i}-1d2c-4b5a-9e8f-7a6b5c4d3e2f` },
        },
        "Normal",
        "Submitted",
        `submitted to endpoint ep-asr as sim-${i}-1d2c-4b5a-9e8f-7a6b5c4d3e2f, attempt 1`,
      );
    keep.push(recorder);
  } else if (name.startsWith("active job: work queue")) {
    const queue = new WorkQueue();
    // Each key waits out its own delay (a Processing job until its timeout), as after a first pass.
    for (let i = 0; i < N; i++) queue.addAfter(`bench-scale/s-${i}`, 3_600_000 - i);
    keep.push(queue);
  } else if (name.startsWith("work queue")) {
    const queue = new WorkQueue();
    for (let i = 0; i < N; i++) queue.add(`bench-scale/s-${i}`);
    let done = 0;
    void queue.run(4, () => {
      done++;
      return Promise.resolve();
    });
    while (done < N) await new Promise((r) => setTimeout(r, 10));
    queue.shutdown();
    keep.push(queue);
  }
  const after = afterGc();
  const perJob = (k: "heapUsed" | "heapTotal" | "rss") => Math.round((after[k] - before[k]) / N);
  process.stdout.write(
    JSON.stringify({
      case: name,
      bytesPerJob: perJob("heapUsed"),
      heapTotalBytesPerJob: perJob("heapTotal"),
      rssBytesPerJob: perJob("rss"),
    }) + "\n",
  );
  void keep;
  process.exit(0); // timers of the work queue case would keep the process alive
}

async function templates(): Promise<{ finished: string; active: string }> {
  const { startControlPlane } = await import("../test/support/controlplane.js");
  const { installCrds } = await import("../test/support/crds.js");
  const { waitForServed } = await import("../test/support/kube.js");
  const cp = await startControlPlane({ dataDir: mkdtempSync(join(tmpdir(), "mo-cache-cost-")) });
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfig);
    await installCrds(kc);
    await waitForServed(kc);
    const api = new KubeApi(kc);
    const ns = "bench-scale";
    await api.rawJson("POST", "/api/v1/namespaces", { metadata: { name: ns } });
    const now = new Date().toISOString();
    // The same finished job the scale benchmark creates.
    const created = await api.create<MediaJob>("mediajobs", ns, {
      apiVersion: API_VERSION,
      kind: "MediaJob",
      metadata: { name: "s-template" },
      spec: { workload: "asr", input: { audio: "s3://bench/s-template.wav" }, timeoutSeconds: 600 },
    } as never);
    await api.replaceStatus("mediajobs", {
      ...created,
      status: finishedJobStatus(created.metadata.uid!, now),
    });
    // An active job as the controller leaves it after submitting it.
    const active = await api.create<MediaJob>("mediajobs", ns, {
      apiVersion: API_VERSION,
      kind: "MediaJob",
      metadata: { name: "a-template" },
      spec: { workload: "asr", input: { audio: "s3://bench/a-template.wav" }, timeoutSeconds: 3600 },
    } as never);
    const withFinalizer = await api.mergePatch<MediaJob>("mediajobs", ns, "a-template", {
      metadata: { finalizers: [FINALIZER], resourceVersion: active.metadata.resourceVersion },
    });
    await api.replaceStatus("mediajobs", {
      ...withFinalizer,
      status: activeJobStatus(active.metadata.uid!, now, "Zm9vYmFyYmF6cXV4cXV1"),
    });
    const list = await api.rawJson<{
      items: Array<{ metadata: { name: string; uid: string; resourceVersion: string } }>;
    }>("GET", `/apis/${API_VERSION}/namespaces/${ns}/mediajobs`);
    const asTemplate = (name: string) => {
      const item = list.items.find((i) => i.metadata.name === name)!;
      return JSON.stringify(item)
        .replaceAll(name, "__NAME__")
        .replaceAll(item.metadata.uid, "__UID__")
        .replaceAll(`"resourceVersion":"${item.metadata.resourceVersion}"`, '"resourceVersion":"__RV__"');
    };
    return { finished: asTemplate("s-template"), active: asTemplate("a-template") };
  } finally {
    await cp.stop();
  }
}

if (!gc) throw new Error("run with node --expose-gc");
if (args.case) {
  await runCase(args.case, args.template!);
} else {
  const tpls = await templates();
  process.stderr.write(`templates: ${JSON.stringify(tpls)}\n`);
  for (const name of CASES) {
    const tpl = name.startsWith("active") ? tpls.active : tpls.finished;
    const out = execFileSync(
      process.execPath,
      [...process.execArgv, process.argv[1]!, "--jobs", String(N), "--case", name, "--template", tpl],
      { encoding: "utf8" },
    );
    process.stdout.write(out);
  }
}
