// What an attempt may read and write in the object store, and until when: the pure half of the
// presigned I/O per attempt (docs/design.md, "Media and storage"; the worker contract in
// docs/provider.md). One GET per input reference, one PUT per declared output, all valid until the
// attempt's deadlines have passed and no longer: a worker that starts by its start deadline and
// runs for its execution timeout can read and write, a URL kept after that opens nothing.
// mint.ts signs the plan.
import { attemptObjectKey, inputObjectKey, OBJECT_NAME, type AttemptScope } from "./keys.js";

/** The longest a SigV4 presigned URL may last (S3 refuses X-Amz-Expires above it). */
export const MAX_PRESIGNED_SECONDS = 7 * 24 * 3600;

/** An input as the job names it: the object, and what the worker may check it against. */
export interface InputReference {
  /** s3://<bucket>/<key>, the key under the job's namespace. */
  uri: string;
  /** Hex SHA-256 of the object, when known. */
  sha256?: string;
  size?: number;
}

/** The deadlines of one attempt, as its submission intent records them. */
export interface AttemptDeadlines {
  /** When the attempt was submitted (the URLs' signing time). */
  submittedAt: Date;
  /** When a worker must have started it (startedAt plus the start deadline); absent: none. */
  startBy?: Date;
  /** The longest the worker may run (the policy.executionTimeout sent), seconds. */
  executionTimeoutSeconds?: number;
  /** When the provider forgets the job at the latest (startedAt plus the policy.ttl sent). */
  providerExpiresAt?: Date;
  /** spec.activeDeadlineSeconds as a time: the controller cancels the job there. */
  activeDeadlineAt?: Date;
}

/**
 * Added to the last deadline: the store's clock and the controller's may differ (S3 does not check
 * a presigned URL's skew, only X-Amz-Date + X-Amz-Expires against its own clock), and a PUT that
 * began just before the deadline is still under way.
 */
export const URL_GRACE_SECONDS = 60;

export interface AttemptIOPlan {
  scope: AttemptScope;
  signedAt: Date;
  expiresAt: Date;
  expiresInSeconds: number;
  gets: Array<{ name: string; key: string; sha256?: string; size?: number }>;
  puts: Array<{ name: string; key: string }>;
}

export type AttemptIOResult =
  { ok: true; plan: AttemptIOPlan } | { ok: false; reason: string; message: string };

/**
 * When the attempt's URLs stop working: its last deadline plus the grace. The last time a worker
 * can run is its latest start (the start deadline, else the provider's time-to-live, which bounds
 * queue and run together) plus the execution timeout, and never past the provider's time-to-live or
 * the job's active deadline. Undefined when nothing bounds the attempt: no URL is minted without an end.
 */
export function attemptUrlExpiry(d: AttemptDeadlines): Date | undefined {
  const latestStart = d.startBy ?? d.providerExpiresAt;
  const bounds: number[] = [];
  if (latestStart !== undefined && d.executionTimeoutSeconds !== undefined)
    bounds.push(latestStart.getTime() + d.executionTimeoutSeconds * 1000);
  if (d.providerExpiresAt !== undefined) bounds.push(d.providerExpiresAt.getTime());
  if (d.activeDeadlineAt !== undefined) bounds.push(d.activeDeadlineAt.getTime());
  if (bounds.length === 0) return undefined;
  return new Date(Math.min(...bounds) + URL_GRACE_SECONDS * 1000);
}

const HEX_SHA256 = /^[0-9a-f]{64}$/;

/**
 * The attempt's GETs and PUTs with their keys and lifetime, or why none can be minted (a reason
 * for the job's condition and a message fit for its status: references and names, never a URL).
 */
export function planAttemptIO(req: {
  scope: AttemptScope;
  bucket: string;
  inputs: Record<string, InputReference>;
  outputs: readonly string[];
  deadlines: AttemptDeadlines;
}): AttemptIOResult {
  const fail = (reason: string, message: string): AttemptIOResult => ({ ok: false, reason, message });
  const gets: AttemptIOPlan["gets"] = [];
  const puts: AttemptIOPlan["puts"] = [];
  const seen = new Set<string>();
  for (const name of req.outputs) {
    if (!OBJECT_NAME.test(name))
      return fail(
        "InvalidOutputName",
        `output "${name.slice(0, 64)}": 1-128 letters, digits, '.', '_' and '-'`,
      );
    if (seen.has(name)) return fail("InvalidOutputName", `output ${name}: declared twice`);
    seen.add(name);
  }
  try {
    for (const [name, ref] of Object.entries(req.inputs)) {
      if (!OBJECT_NAME.test(name))
        return fail("InvalidInputReference", `input "${name.slice(0, 64)}": not a valid name`);
      if (ref.sha256 !== undefined && !HEX_SHA256.test(ref.sha256))
        return fail("InvalidInputReference", `input ${name}: sha256 must be 64 lowercase hex digits`);
      if (ref.size !== undefined && (!Number.isSafeInteger(ref.size) || ref.size < 0))
        return fail("InvalidInputReference", `input ${name}: size must be a whole number of bytes`);
      const key = inputObjectKey(ref.uri, req.bucket, req.scope.namespace);
      gets.push({
        name,
        key,
        ...(ref.sha256 !== undefined && { sha256: ref.sha256 }),
        ...(ref.size !== undefined && { size: ref.size }),
      });
    }
  } catch (err) {
    return fail("InvalidInputReference", (err as Error).message);
  }
  // The job's own mistakes (names, references) are told first: they hold whatever the deadlines.
  const expiresAt = attemptUrlExpiry(req.deadlines);
  if (expiresAt === undefined)
    return fail(
      "StorageUnbounded",
      "the attempt has no deadline (execution timeout with a start deadline or time-to-live, or an active deadline): no URL is minted without an end",
    );
  const signedAt = req.deadlines.submittedAt;
  let expiresInSeconds = Math.ceil((expiresAt.getTime() - signedAt.getTime()) / 1000);
  // An attempt bounded by the provider's longest time-to-live (7 days, the same as SigV4's
  // longest URL) loses the grace rather than the URLs.
  if (
    expiresInSeconds > MAX_PRESIGNED_SECONDS &&
    expiresInSeconds - URL_GRACE_SECONDS <= MAX_PRESIGNED_SECONDS
  )
    expiresInSeconds = MAX_PRESIGNED_SECONDS;
  if (expiresInSeconds < 1) return fail("StorageDeadlinePassed", "the attempt's deadlines have passed");
  if (expiresInSeconds > MAX_PRESIGNED_SECONDS)
    return fail(
      "StorageDeadlineTooLong",
      `the attempt's deadlines end ${expiresInSeconds} s after its submission; a presigned URL lasts at most ${MAX_PRESIGNED_SECONDS} s (7 days): ` +
        "set spec.executionTimeoutSeconds or spec.activeDeadlineSeconds",
    );
  // The scope is the object's own metadata: a bad one is a bug, thrown, not a job's condition.
  for (const name of req.outputs) puts.push({ name, key: attemptObjectKey(req.scope, name) });
  const plan = {
    scope: req.scope,
    signedAt,
    expiresAt: new Date(signedAt.getTime() + expiresInSeconds * 1000),
    expiresInSeconds,
    gets,
    puts,
  };
  return { ok: true, plan };
}
