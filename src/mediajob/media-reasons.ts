// The reasons a job's media can end or fail an attempt with (media.ts), shown as the Failed reason
// when they end the job: the job's error starts with the reason (`OutputMissing: ...`), as the
// deadline's do, so the reason survives a retry's return to Pending and shows once the job fails.

/** A COMPLETED attempt whose declared outputs were not stored as reported: failed, retried by policy. */
export const OUTPUT_FAILURES = [
  "OutputMissing",
  "OutputSizeMismatch",
  "OutputDigestMismatch",
  // An output the worker left behind a URL of its own could not be copied into the store (kept-outputs.ts).
  "OutputNotKept",
] as const;

/** Why no attempt of a job with media can be sent: final, the spec or the installation must change. */
export const MEDIA_REFUSALS = [
  "StorageNotConfigured",
  "InvalidInputReference",
  "InvalidOutputName",
  "StorageDeadlineTooLong",
  "StorageDeadlinePassed",
  "StorageUnbounded",
] as const;

const ALL: ReadonlySet<string> = new Set([...OUTPUT_FAILURES, ...MEDIA_REFUSALS]);

/** The media reason a job's error starts with, if any. */
export function mediaFailureReason(error: string | undefined): string | undefined {
  const m = error === undefined ? undefined : /^([A-Za-z]+):/.exec(error);
  return m && ALL.has(m[1]!) ? m[1] : undefined;
}
