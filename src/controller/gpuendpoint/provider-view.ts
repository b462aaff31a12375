// What every GpuEndpoint reconcile needs from the provider, fetched at most once per tick: the
// credential check (GraphQL myself { id }) and the endpoint list, shared by all endpoints, and
// each endpoint's /health. However often an endpoint is reconciled (a spec edit, a tick), the
// provider is asked about it once per tick: its rate limit is shared with job submissions.
// Concurrent reconciles share one in-flight request; a failed fetch is not cached.
import type { EndpointHealthReport, GpuProviderClient, ProviderEndpoint } from "../../provider/index.js";

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
}

export class ProviderView {
  private readonly credentials: Cached<{ accountId: string }>;
  private readonly endpoints: Cached<ProviderEndpoint[]>;
  private readonly health = new Map<string, Cached<EndpointHealthReport>>();

  constructor(
    private readonly provider: Pick<GpuProviderClient, "checkKey" | "listEndpoints" | "health">,
    private readonly ttlMs: number,
    private readonly clock: () => number = Date.now,
  ) {
    this.credentials = new Cached(() => provider.checkKey(), ttlMs, clock);
    this.endpoints = new Cached(() => provider.listEndpoints(), ttlMs, clock);
  }

  /** How many key checks went to the provider (one per tick, whatever the number of endpoints). */
  get credentialChecks(): number {
    return this.credentials.fetches;
  }

  checkKey(): Promise<{ accountId: string }> {
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

  /** After we changed an endpoint, the next reader must see the provider's new state. */
  invalidateEndpoints(): void {
    this.endpoints.invalidate();
  }
}
