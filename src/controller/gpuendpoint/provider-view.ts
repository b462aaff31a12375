// What every GpuEndpoint reconcile needs from the provider's management API, fetched once per
// tick for all of them: the credential check (GraphQL myself { id }) and the endpoint list.
// Concurrent reconciles share one in-flight request; a failed fetch is not cached.
import type { GpuProviderClient, ProviderEndpoint } from "../../provider/index.js";

export class ProviderView {
  private credentials?: { at: number; value: Promise<{ accountId: string }> };
  private endpoints?: { at: number; value: Promise<ProviderEndpoint[]> };
  credentialChecks = 0;

  constructor(
    private readonly provider: Pick<GpuProviderClient, "checkKey" | "listEndpoints">,
    private readonly ttlMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  private fresh(entry: { at: number } | undefined): boolean {
    return entry !== undefined && this.clock() - entry.at < this.ttlMs;
  }

  checkKey(): Promise<{ accountId: string }> {
    if (!this.fresh(this.credentials)) {
      this.credentialChecks++;
      const value = this.provider.checkKey();
      const entry = { at: this.clock(), value };
      this.credentials = entry;
      value.catch(() => {
        if (this.credentials === entry) this.credentials = undefined;
      });
    }
    return this.credentials!.value;
  }

  listEndpoints(): Promise<ProviderEndpoint[]> {
    if (!this.fresh(this.endpoints)) {
      const value = this.provider.listEndpoints();
      const entry = { at: this.clock(), value };
      this.endpoints = entry;
      value.catch(() => {
        if (this.endpoints === entry) this.endpoints = undefined;
      });
    }
    return this.endpoints!.value;
  }

  /** After we changed an endpoint, the next reader must see the provider's new state. */
  invalidateEndpoints(): void {
    this.endpoints = undefined;
  }
}
