// Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules: acquire when the
// Lease is free or its holder has not renewed within leaseDuration (by our own clock, measured
// from when we last saw the record change, so clocks need not agree); renew every retryPeriod;
// give up leadership when renewing has failed for renewDeadline; release on graceful shutdown.
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { KubeApi } from "../k8s/api.js";
import { describeError, isAlreadyExists, isConflict, isNotFound } from "../k8s/errors.js";

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  identity?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  log: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

interface Lease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** metav1.MicroTime wants exactly six fractional digits. */
const microTime = (d = new Date()): string => d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");

function defaultIdentity(): string {
  return `${process.env.POD_NAME ?? process.env.HOSTNAME ?? "local"}_${randomBytes(4).toString("hex")}`;
}

export class LeaderElector {
  readonly identity: string;
  private leading = false;
  private stopped = false;
  private timer?: NodeJS.Timeout;
  private watchdog?: NodeJS.Timeout;
  private observed?: { record: string; at: number };
  /** The read-and-write of the lease under way, which stop() waits out before it releases. */
  private attempt?: Promise<void>;
  private lastRenew = 0;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  /** Each Lease request's own deadline: a renew must be able to fail, and retry, within the renew deadline. */
  private readonly requestTimeoutMs: number;

  constructor(
    private readonly api: KubeApi,
    private readonly opts: LeaderElectionOptions,
  ) {
    this.identity = opts.identity ?? defaultIdentity();
    this.leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    this.requestTimeoutMs = Math.max(500, Math.floor(this.renewDeadlineMs / 2));
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /**
   * The fence checked immediately before every side effect at the provider: true only while the
   * last successful renew started less than renewDeadline ago. renewDeadline is shorter than the
   * lease duration, and a rival may take the lease only after it has seen the record unchanged for
   * a whole lease duration, so a leader that passes this check cannot have been replaced yet.
   */
  holdsLease(now = Date.now()): boolean {
    return this.leading && now - this.lastRenew < this.renewDeadlineMs;
  }

  private get path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.opts.namespace}/leases`;
  }

  start(): void {
    this.stopped = false;
    if (this.renewDeadlineMs >= this.leaseDurationMs)
      throw new Error("leader election: the renew deadline must be shorter than the lease duration");
    // A renew that hangs (a stalled connection to the apiserver) must not keep us leading: this
    // watchdog steps down on time whatever the request is doing.
    this.watchdog = setInterval(
      () => {
        if (this.leading && !this.holdsLease()) this.lose("could not renew the lease in time");
      },
      Math.max(50, Math.min(250, this.renewDeadlineMs / 10)),
    );
    this.watchdog.unref();
    const tick = async () => {
      if (this.stopped) return;
      await (this.attempt = this.tryAcquireOrRenew());
      if (!this.stopped) this.timer = setTimeout(tick, this.retryPeriodMs);
    };
    void tick();
  }

  private lose(reason: string): void {
    if (!this.leading) return;
    this.leading = false;
    this.opts.log.warn({ identity: this.identity, reason }, "leadership lost");
    this.opts.onStoppedLeading();
  }

  private async tryAcquireOrRenew(): Promise<void> {
    // The renew counts from when it was sent, not from when its answer came back: the lease's
    // renewTime says "now" as of the request, and a slow answer must not extend our fence.
    const now = Date.now();
    const spec = (transitions: number, acquireTime?: string) => ({
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000),
      acquireTime: acquireTime ?? microTime(),
      renewTime: microTime(),
      leaseTransitions: transitions,
    });
    try {
      let lease: Lease | undefined;
      try {
        lease = await this.api.rawJson<Lease>("GET", `${this.path}/${this.opts.name}`, undefined, undefined, {
          timeoutMs: this.requestTimeoutMs,
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      // Stopped while reading: nothing more is written (stop() releases what we hold).
      if (this.stopped) return;
      if (!lease) {
        await this.api.rawJson(
          "POST",
          this.path,
          {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name: this.opts.name, namespace: this.opts.namespace },
            spec: spec(0),
          },
          undefined,
          { timeoutMs: this.requestTimeoutMs },
        );
        return this.acquired(now);
      }
      const record = JSON.stringify([lease.spec.holderIdentity, lease.spec.renewTime]);
      if (this.observed?.record !== record) this.observed = { record, at: now };
      const holder = lease.spec.holderIdentity;
      const duration = (lease.spec.leaseDurationSeconds ?? 15) * 1000;
      const heldByOther = holder && holder !== this.identity && now < this.observed.at + duration;
      if (heldByOther) {
        this.lose(`lease held by ${holder}`);
        return;
      }
      const transitions = (lease.spec.leaseTransitions ?? 0) + (holder === this.identity ? 0 : 1);
      await this.api.rawJson(
        "PUT",
        `${this.path}/${this.opts.name}`,
        { ...lease, spec: spec(transitions, holder === this.identity ? lease.spec.acquireTime : undefined) },
        undefined,
        { timeoutMs: this.requestTimeoutMs },
      );
      this.acquired(now);
    } catch (err) {
      if (!(isConflict(err) || isAlreadyExists(err))) {
        this.opts.log.warn(
          { err: describeError(err) },
          "leader election: could not read or update the lease",
        );
      }
      if (this.leading && !this.holdsLease()) this.lose("could not renew the lease in time");
    }
  }

  private acquired(sentAt: number): void {
    if (this.stopped) return;
    this.lastRenew = sentAt;
    if (Date.now() - sentAt >= this.renewDeadlineMs) {
      // The answer came after the deadline: the lease may already be someone else's.
      this.lose("the lease renew answered after the renew deadline");
      return;
    }
    if (this.leading) return;
    this.leading = true;
    this.opts.log.info({ identity: this.identity }, "became the leader");
    this.opts.onStartedLeading();
  }

  /** Stops campaigning; a leader releases the Lease so a successor need not wait it out. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearInterval(this.watchdog);
    // A renew under way when the stop came may still write the lease (a read answered after the
    // release saw it free and took it again): the release comes after it, so it is the last word.
    await this.attempt;
    if (!this.leading) return;
    this.leading = false;
    try {
      const lease = await this.api.rawJson<Lease>("GET", `${this.path}/${this.opts.name}`);
      if (lease.spec.holderIdentity === this.identity) {
        await this.api.rawJson("PUT", `${this.path}/${this.opts.name}`, {
          ...lease,
          spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: microTime() },
        });
      }
    } catch (err) {
      this.opts.log.warn({ err: describeError(err) }, "could not release the lease");
    }
    this.opts.onStoppedLeading();
  }
}
