// What every cache keeps of an object: all but the server-side-apply bookkeeping and the
// last-applied annotation (client-go's TransformStripManagedFields), which no controller reads and
// which is often the largest part of a small object.
import type { KubeObject } from "../k8s/api.js";

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * Drops managedFields and the last-applied annotation (for any cached object). The metadata is
 * rebuilt without them rather than `delete`d from: deleting a property turns an object into a
 * dictionary, several times the size of the same object with fixed fields.
 */
export function stripMetadata<T extends KubeObject>(obj: T): T {
  const {
    managedFields: _managedFields,
    annotations,
    ...meta
  } = obj.metadata as T["metadata"] & {
    managedFields?: unknown;
    annotations?: Record<string, string>;
  };
  const kept = annotations && LAST_APPLIED in annotations ? withoutLastApplied(annotations) : annotations;
  if (kept) (meta as typeof meta & { annotations?: Record<string, string> }).annotations = kept;
  obj.metadata = meta as T["metadata"];
  return obj;
}

function withoutLastApplied(annotations: Record<string, string>): Record<string, string> | undefined {
  const { [LAST_APPLIED]: _dropped, ...rest } = annotations;
  return Object.keys(rest).length ? rest : undefined;
}
