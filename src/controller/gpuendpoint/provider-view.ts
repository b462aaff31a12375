// What every GpuEndpoint reconcile needs from the provider's management API, fetched once per
// tick for all of them: the credential check (GraphQL myself { id }) and the endpoint list.
// Concurrent reconciles share one in-flight request; a failed fetch is not cached.
import type { GpuProviderClient, KeyIdentity, ProviderEndpoint } from "../../provider/index.js";

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
  private readonly credentials: Cached<KeyIdentity>;
  private readonly endpoints: Cached<ProviderEndpoint[]>;

  constructor(
    provider: Pick<GpuProviderClient, "checkKey" | "listEndpoints">,
    ttlMs: number,
    clock: () => number = Date.now,
  ) {
    this.credentials = new Cached(() => provider.checkKey(), ttlMs, clock);
    this.endpoints = new Cached(() => provider.listEndpoints(), ttlMs, clock);
  }

  /** How many key checks went to the provider (one per tick, whatever the number of endpoints). */
  get credentialChecks(): number {
    return this.credentials.fetches;
  }

  checkKey(): Promise<KeyIdentity> {
    return this.credentials.get();
  }

  listEndpoints(): Promise<ProviderEndpoint[]> {
    return this.endpoints.get();
  }

  /** After we changed an endpoint, the next reader must see the provider's new state. */
  invalidateEndpoints(): void {
    this.endpoints.invalidate();
  }
}
