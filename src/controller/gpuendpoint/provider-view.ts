// What every GpuEndpoint reconcile needs from the provider: each endpoint's /health, fetched at
// most once per tick, and the endpoint list (settings, for drift), shared by all endpoints and
// fetched once per drift-check interval (PROVIDER_DRIFT_CHECK_SECONDS), or at once after we changed
// an endpoint or its spec changed. So at rest the provider is asked about each endpoint about once
// per tick: its rate limit is shared with job submissions. The explicit key check (which names the
// account) is repeated only every few minutes, or at once after a call was refused.
// Concurrent reconciles share one in-flight request; a failed fetch is not cached.
import type {
  EndpointHealthReport,
  GpuProviderClient,
  KeyIdentity,
  ProviderEndpoint,
} from "../../provider/index.js";

/** While the endpoint list keeps working, the key is checked on its own this often. */
const KEY_RECHECK_MS = 5 * 60_000;

/** One value fetched at most once per ttl; callers in the meantime share the same promise. */
class Cached<T> {
  private entry?: { at: number; value: Promise<T> };
  fetches = 0;

  constructor(
    private readonly fetch: () => Promise<T>,
    private readonly ttlMs: number,
    private readonly clock: () => number,
  ) {}

  get(): Promise<T> {
    if (!this.entry || this.clock() - this.entry.at >= this.ttlMs) {
      this.fetches++;
      const entry = { at: this.clock(), value: this.fetch() };
      this.entry = entry;
      entry.value.catch(() => {
        if (this.entry === entry) this.entry = undefined;
      });
    }
    return this.entry.value;
  }

  invalidate(): void {
    this.entry = undefined;
  }

  /** Applies a change we know of to the cached value (if any), keeping its age. */
  amend(change: (value: T) => T): void {
    if (this.entry) this.entry = { at: this.entry.at, value: this.entry.value.then(change) };
  }
}

export class ProviderView {
  private readonly credentials: Cached<KeyIdentity>;
  private readonly endpoints: Cached<ProviderEndpoint[]>;
  private readonly health = new Map<string, Cached<EndpointHealthReport>>();

  /**
   * `ttlMs`: how long a health report is shared (a tick). `listTtlMs`: how long the endpoint list
   * is (the drift-check interval; never shorter than `ttlMs`).
   */
  constructor(
    private readonly provider: Pick<GpuProviderClient, "checkKey" | "listEndpoints" | "health">,
    private readonly ttlMs: number,
    listTtlMs: number = ttlMs,
    private readonly clock: () => number = Date.now,
  ) {
    this.credentials = new Cached(() => provider.checkKey(), Math.max(ttlMs, KEY_RECHECK_MS), clock);
    this.endpoints = new Cached(() => provider.listEndpoints(), Math.max(ttlMs, listTtlMs), clock);
  }

  /** How many key checks went to the provider (whatever the number of endpoints). */
  get credentialChecks(): number {
    return this.credentials.fetches;
  }

  /** How many endpoint listings went to the provider: one per drift check for all endpoints. */
  get endpointListings(): number {
    return this.endpoints.fetches;
  }

  checkKey(): Promise<KeyIdentity> {
    return this.credentials.get();
  }

  listEndpoints(): Promise<ProviderEndpoint[]> {
    return this.endpoints.get();
  }

  endpointHealth(endpointId: string): Promise<EndpointHealthReport> {
    let cached = this.health.get(endpointId);
    if (!cached) {
      cached = new Cached(() => this.provider.health(endpointId), this.ttlMs, this.clock);
      this.health.set(endpointId, cached);
    }
    return cached.get();
  }

  /** The provider refused the key: check it again on the next look, not minutes later. */
  invalidateCredentials(): void {
    this.credentials.invalidate();
  }

  /** The next reader must see the provider's state (a spec changed; an endpoint may be gone). */
  invalidateEndpoints(): void {
    this.endpoints.invalidate();
  }

  /** We changed an endpoint and the provider answered with it: the listing holds the answer. */
  endpointSaved(saved: ProviderEndpoint): void {
    this.endpoints.amend((all) => all.map((e) => (e.id === saved.id ? saved : e)));
  }
}
