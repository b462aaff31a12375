// The GpuEndpoint plan's actions at the provider, each answered as an ActionOutcome for
// afterAction (src/gpuendpoint/plan.ts): create the endpoint, or set its workers. The provider
// view is told what changed, so the next listing is the provider's state.
import type { ActionOutcome, EndpointAction } from "../../gpuendpoint/plan.js";
import type { EndpointCreation } from "../../gpuendpoint/resolution.js";
import type { ProviderEndpoint } from "../../provider/index.js";
import { failureOf } from "./gather.js";
import type { GpuEndpointDeps } from "./deps.js";

type ActDeps = Pick<GpuEndpointDeps, "provider" | "view">;

export class EndpointActions {
  /** Creations in flight, by provider endpoint name. */
  private readonly creating = new Map<string, Promise<ActionOutcome>>();

  constructor(private readonly d: ActDeps) {}

  async run(action: EndpointAction): Promise<ActionOutcome> {
    if (action.type === "create") return this.createOnce(action.creation);
    try {
      const updated = await this.d.provider.updateEndpointWorkers(action.endpointId, action.change);
      this.d.view.endpointSaved(updated);
      return { endpoint: updated };
    } catch (err) {
      return { failed: failureOf(err) };
    }
  }

  /**
   * Creates the provider endpoint unless one of its name exists: one creation per name at a time
   * in this controller (GpuEndpoints of several namespaces, or several in one, may all want the
   * same conventional name, and reconcile concurrently), each after a fresh listing, not the
   * tick's cached one. A creation whose answer was lost is not sent again blindly: the listing of
   * the next attempt finds it.
   */
  private createOnce(creation: EndpointCreation): Promise<ActionOutcome> {
    const name = creation.name;
    const previous = this.creating.get(name) ?? Promise.resolve();
    const run = previous
      .catch(() => undefined)
      .then(() => this.create(creation))
      .catch((err: unknown): ActionOutcome => ({ failed: failureOf(err) }));
    this.creating.set(name, run);
    return run.finally(() => {
      if (this.creating.get(name) === run) this.creating.delete(name);
    });
  }

  private async create(creation: EndpointCreation): Promise<ActionOutcome> {
    this.d.view.invalidateEndpoints();
    const existing = (await this.d.view.listEndpoints()).find((e) => e.name === creation.name);
    if (existing) return { endpoint: existing, existed: true };
    try {
      // No id: the provider creates the endpoint and assigns one.
      return { endpoint: await this.d.provider.saveEndpoint(creation as ProviderEndpoint) };
    } finally {
      // Created, refused or unknown: the next listing must ask the provider, not the cache.
      this.d.view.invalidateEndpoints();
    }
  }
}
