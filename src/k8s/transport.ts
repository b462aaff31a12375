// Every request to the Kubernetes API has a deadline. @kubernetes/client-node sends requests with
// undici's fetch and no deadline of its own: an apiserver that accepts a connection and never
// answers (a black-holed network path, a stalled proxy) would hang the call, and the reconcile
// or lease renewal waiting on it, forever. Every typed call and every raw request of ours goes
// through the one HTTP library here, which bounds the whole exchange (sending, waiting, reading
// the body) by an AbortSignal: the client's default deadline, or the caller's own.
import {
  createConfiguration,
  ResponseContext,
  type PromiseHttpLibrary,
  type RequestContext,
} from "@kubernetes/client-node";
import { DEFAULT_KUBE_TIMEOUT_MS, deadlineOf, deadlineSignal, KubeTimeoutError } from "./deadline.js";

export { KubeTimeoutError, deadlineSignal, type CallOptions } from "./deadline.js";

const isTimeoutReason = (reason: unknown): boolean =>
  reason instanceof Error || reason instanceof DOMException
    ? (reason as { name: string }).name === "TimeoutError"
    : false;

/**
 * client-node's own fetch library (its bundled undici, so the dispatcher its KubeConfig builds
 * fits), with a deadline on every request and the body read before the deadline ends.
 */
export class DeadlineHttpLibrary implements PromiseHttpLibrary {
  private readonly fetchLibrary = createConfiguration().httpApi;

  constructor(readonly defaultTimeoutMs: number = DEFAULT_KUBE_TIMEOUT_MS) {}

  async send(request: RequestContext): Promise<ResponseContext> {
    let signal = request.getSignal();
    if (!signal) {
      signal = deadlineSignal(this.defaultTimeoutMs);
      request.setSignal(signal);
    }
    try {
      const response = await this.fetchLibrary.send(request).toPromise();
      const text = await response.body.text();
      return new ResponseContext(response.httpStatusCode, response.headers, {
        text: () => Promise.resolve(text),
        binary: () => Promise.resolve(Buffer.from(text)),
        stream: () => null,
      });
    } catch (err) {
      if (signal.aborted && isTimeoutReason(signal.reason)) {
        const deadline = deadlineOf(signal);
        const ours = deadline && deadline.timer.aborted ? deadline.timeoutMs : undefined;
        const path = new URL(request.getUrl()).pathname;
        throw new KubeTimeoutError(request.getHttpMethod(), path, ours);
      }
      throw err;
    }
  }
}
