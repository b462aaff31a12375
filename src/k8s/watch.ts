// client-node's Watch, with the inactivity window its caller chooses.
import { Watch, type KubeConfig } from "@kubernetes/client-node";

/**
 * @kubernetes/client-node 2.x aborts a watch that receives nothing for 30 s (a private
 * `requestTimeoutMs`, not configurable) with a TimeoutError. The apiserver sends the first
 * bookmark of an idle watch only shortly before its timeoutSeconds, so with a 60 s watch every
 * quiet resource would be cut and rewatched every 30 s. The window is set to the caller's own
 * silence limit instead; an abort after it is the caller's "stalled" case (see isTimeout).
 */
export function watchWithInactivityLimit(kc: KubeConfig, inactivityMs: number): Watch {
  const watch = new Watch(kc);
  const settable = watch as unknown as { requestTimeoutMs?: number };
  if (typeof settable.requestTimeoutMs !== "number")
    throw new Error(
      "@kubernetes/client-node's Watch has no requestTimeoutMs: revisit watchWithInactivityLimit",
    );
  settable.requestTimeoutMs = inactivityMs;
  return watch;
}
