// Kubernetes API errors, classified so callers can act on them. @kubernetes/client-node throws
// ApiException with `code` and a `body` that may be a JSON string.

export interface KubeStatusError {
  code: number;
  reason?: string;
  message: string;
}

export function kubeError(err: unknown): KubeStatusError | undefined {
  if (!err || typeof err !== "object") return undefined;
  const e = err as { code?: unknown; statusCode?: unknown; body?: unknown; message?: unknown };
  const code =
    typeof e.code === "number" ? e.code : typeof e.statusCode === "number" ? e.statusCode : undefined;
  if (code === undefined) return undefined;
  let body = e.body;
  if (typeof body === "string") {
    try {
      body = JSON.parse(body);
    } catch {
      /* not JSON: keep the text */
    }
  }
  const status = (body && typeof body === "object" ? body : {}) as { reason?: string; message?: string };
  return {
    code,
    reason: status.reason,
    message: status.message ?? (typeof body === "string" ? body : String(e.message ?? `HTTP ${code}`)),
  };
}

export const isNotFound = (err: unknown): boolean => kubeError(err)?.code === 404;
export const isConflict = (err: unknown): boolean => kubeError(err)?.code === 409 && !isAlreadyExists(err);
export const isAlreadyExists = (err: unknown): boolean => kubeError(err)?.reason === "AlreadyExists";
export const isGone = (err: unknown): boolean => kubeError(err)?.code === 410;
/** A call or watch that hit its deadline (KubeTimeoutError, or a watch's TimeoutError). */
export const isTimeout = (err: unknown): boolean =>
  !!err && typeof err === "object" && ["KubeTimeoutError", "TimeoutError"].includes((err as Error).name);

/** A one-line description of any error, for logs, Events and conditions. */
export function describeError(err: unknown): string {
  const k = kubeError(err);
  if (k) return `${k.code}${k.reason ? ` ${k.reason}` : ""}: ${k.message}`;
  if (err instanceof Error) return err.message;
  return String(err);
}
