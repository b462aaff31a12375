// The stage cache, the domain's half (docs/design.md, "The stage cache"): which jobs are a stage
// whose outputs can be reused, the stage's key, and what a job found in the cache becomes. A stage
// is its workload, the endpoint's template (the worker image: another image may answer otherwise),
// its input and its media inputs' digests, and the names of the outputs it declares; the same
// stage in another namespace is another entry (src/storage/stage-cache.ts), never shared. Pure.
import { createHash } from "node:crypto";
import { stableJson } from "../stable-json.js";
import { getCondition } from "../crds/conditions.js";
import type { GpuEndpoint } from "../crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { stageEntryKey, type StageEntry } from "../storage/stage-cache.js";
import { withCondition, type PlannedEvent } from "./conditions.js";
import { storedOutput } from "./media.js";

const CACHE_HIT = "CacheHit";

/**
 * The input as it decides the stage's result: a pipeline step's `previous` (the step before it) by
 * its output only, not by which job it was (its name and uid differ from one run to the next).
 */
function stageInput(input: MediaJob["spec"]["input"]): unknown {
  if (input === undefined) return null;
  const previous = (input as { previous?: unknown }).previous;
  if (previous === null || typeof previous !== "object" || !("output" in previous)) return input;
  return { ...input, previous: { output: (previous as { output: unknown }).output } };
}

/**
 * The stage's key (hex SHA-256), or undefined when the job is not cached: `spec.cache: Never`, no
 * declared output (nothing to reuse), or a media input without its digest (its bytes unknown).
 */
export function stageKey(job: MediaJob, endpoint: GpuEndpoint | undefined): string | undefined {
  const media = job.spec.media;
  if (job.spec.cache === "Never" || !media?.outputs?.length) return undefined;
  const inputs = media.inputs ?? [];
  if (inputs.some((i) => i.sha256 === undefined)) return undefined;
  const stage = {
    v: 1,
    workload: job.spec.workload,
    // The worker image: the template the endpoint is created from, else (an endpoint adopted by id)
    // the provider endpoint itself.
    template:
      endpoint?.spec.create?.templateId ?? endpoint?.status?.endpointId ?? endpoint?.spec.endpointId ?? null,
    input: stageInput(job.spec.input),
    inputs: inputs.map((i) => [i.name, i.sha256]).sort(([a], [b]) => (a! < b! ? -1 : 1)),
    outputs: media.outputs.map((o) => o.name).sort(),
  };
  return createHash("sha256").update(stableJson(stage)).digest("hex");
}

/**
 * A job completed from the cache: its outputs are the cached ones (in its own namespace), its
 * output the cached worker's, and nothing was run, so nothing is billed (no usage attempt).
 */
export function cacheHitStatus(
  job: MediaJob,
  status: MediaJobStatus,
  hit: StageEntry & { entryKey: string },
  bucket: string,
  now: string,
): { status: MediaJobStatus; events: PlannedEvent[] } {
  const outputs = hit.outputs.map((o) => storedOutput(bucket, o));
  const message = `completed from the stage cache: ${outputs.length} output(s) stored by an earlier job of the same stage; not run, not billed`;
  const { error: _e, submission: _s, providerJobId: _p, ...rest } = status;
  const verified = withCondition(
    rest,
    job.metadata.generation,
    { type: "OutputsVerified", status: "True", reason: CACHE_HIT, message },
    now,
  );
  return {
    status: {
      ...verified,
      phase: "Completed",
      outputs,
      ...(hit.output !== undefined && { output: hit.output as MediaJobStatus["output"] }),
      completedAt: now,
      updatedAt: now,
    },
    events: [["Normal", CACHE_HIT, message]],
  };
}

/**
 * The cache entry a completed job leaves (its key and body), or undefined: a job that ran no stage
 * of its own (a cache hit), had no stage key, or stored no outputs.
 */
export function stageEntryFor(job: MediaJob): { key: string; body: StageEntry } | undefined {
  const s = job.status;
  if (
    s?.phase !== "Completed" ||
    s.stageKey === undefined ||
    getCondition(s.conditions, "OutputsVerified")?.reason === CACHE_HIT ||
    !s.outputs?.length
  )
    return undefined;
  const attempt = s.attempts ?? 1;
  return {
    key: stageEntryKey(job.metadata.namespace ?? "", s.stageKey, job.metadata.uid ?? "", attempt),
    body: {
      outputs: s.outputs.map((o) => ({
        name: o.name,
        key: o.key,
        size: o.size,
        ...(o.sha256 !== undefined && { sha256: o.sha256 }),
      })),
      ...(s.output !== undefined && { output: s.output }),
    },
  };
}
