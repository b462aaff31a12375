// Where a job's objects live in the bucket, and which objects a job may read. Every key an attempt
// writes is `<namespace>/<jobUid>/<attempt>/<name>`: the namespace first, so a tenant's objects
// share one prefix (one bucket policy, one listing per tenant); the job's uid, not its name, so a
// job deleted and created again under the same name never meets the old one's objects; the attempt,
// so a duplicate execution of attempt 1 (the provider ran it twice) cannot overwrite what attempt 2
// delivered. An input reference may name any key under the job's own namespace and nothing else:
// the controller's credentials reach the whole bucket, and a presigned GET for another tenant's key
// would hand that tenant's media to this one. Pure.

/** An output's or input's name: what the worker sees, and the key's last segment. */
export const OBJECT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const UID = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;

export interface AttemptScope {
  namespace: string;
  /** metadata.uid of the MediaJob. */
  jobUid: string;
  /** The attempt (status.attempts when it was submitted), from 1. */
  attempt: number;
}

class ObjectKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ObjectKeyError";
  }
}

/** The key of one object an attempt writes: `<namespace>/<jobUid>/<attempt>/<name>`. */
export function attemptObjectKey(scope: AttemptScope, name: string): string {
  if (!NAMESPACE.test(scope.namespace))
    throw new ObjectKeyError("namespace: not a Kubernetes namespace name");
  if (!UID.test(scope.jobUid)) throw new ObjectKeyError("jobUid: not an object uid");
  if (!Number.isSafeInteger(scope.attempt) || scope.attempt < 1)
    throw new ObjectKeyError("attempt: must be a whole number from 1");
  if (!OBJECT_NAME.test(name))
    throw new ObjectKeyError(
      `name "${name.slice(0, 64)}": 1-128 letters, digits, '.', '_' and '-', starting with a letter or digit`,
    );
  return `${scope.namespace}/${scope.jobUid}/${scope.attempt}/${name}`;
}

/** The prefix of every object of a job, all attempts (for its deletion and `kubectl media outputs`). */
export function jobObjectPrefix(namespace: string, jobUid: string): string {
  return `${namespace}/${jobUid}/`;
}

/**
 * The key an input reference names: `s3://<bucket>/<key>` in the configured bucket, under the job's
 * namespace. Anything else (another bucket, another namespace's key, `..` segments, an http URL) is
 * refused with a message fit for the job's status: the reference is the user's, never a secret.
 */
export function inputObjectKey(uri: string, bucket: string, namespace: string): string {
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(uri);
  if (!m) throw new ObjectKeyError(`"${uri.slice(0, 256)}": an input reference is s3://<bucket>/<key>`);
  const [, refBucket, key] = m as unknown as [string, string, string];
  if (refBucket !== bucket)
    throw new ObjectKeyError(`"${uri.slice(0, 256)}": inputs are read from the bucket ${bucket} only`);
  const segments = key.split("/");
  if (segments.some((s) => s === "" || s === "." || s === ".."))
    throw new ObjectKeyError(`"${uri.slice(0, 256)}": a key has no empty, '.' or '..' segments`);
  if (key.length > 1024) throw new ObjectKeyError("an object key is at most 1024 bytes");
  if (segments[0] !== namespace || segments.length < 2)
    throw new ObjectKeyError(
      `"${uri.slice(0, 256)}": a job reads only keys under its namespace (${namespace}/)`,
    );
  return key;
}
