// /readyz: the sidecar is ready when the Kubernetes API answers the request it depends on (a list
// of PaymentEvents in its namespace, limit 1: reachability, credentials, RBAC and the CRD in one).
// Answers are cached briefly so a flood of probes cannot become a flood of apiserver calls. The probe
// has a deadline of its own (2 s, or the client's if shorter): the kubelet's probe must get an answer.
import type { KubeApi } from "../k8s/api.js";
import { describeError } from "../k8s/errors.js";

export interface Readiness {
  ready: boolean;
  reason?: string;
}

export class KubeReadiness {
  #cached: { at: number; value: Readiness } | undefined;
  #pending: Promise<Readiness> | undefined;

  constructor(
    private readonly api: KubeApi,
    private readonly namespace: string,
    private readonly opts: { timeoutMs?: number; cacheMs?: number } = {},
  ) {}

  async check(): Promise<Readiness> {
    const cacheMs = this.opts.cacheMs ?? 1000;
    if (this.#cached && Date.now() - this.#cached.at < cacheMs) return this.#cached.value;
    this.#pending ??= this.#probe().finally(() => (this.#pending = undefined));
    return this.#pending;
  }

  async #probe(): Promise<Readiness> {
    const timeoutMs = Math.min(this.opts.timeoutMs ?? 2000, this.api.timeoutMs);
    const path = `${this.api.objectPath("paymentevents", this.namespace)}?limit=1`;
    const value = await this.api.rawJson("GET", path, undefined, undefined, { timeoutMs }).then(
      (): Readiness => ({ ready: true }),
      (err: unknown): Readiness => ({ ready: false, reason: describeError(err).slice(0, 300) }),
    );
    this.#cached = { at: Date.now(), value };
    return value;
  }
}
