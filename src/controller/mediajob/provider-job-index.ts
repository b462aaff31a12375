// Which cached MediaJobs hold each provider job id (status.providerJobId), kept from the informer's
// events: controller-runtime's field index on the cache. A submission asks whether another job
// holds the id its /run answer names (submit.ts heldElsewhere); walking the whole cache for that
// made each submission cost as much as the cache is large.
import type { MediaJob } from "../../crds/mediajob.js";
import type { InformerEvent } from "../../runtime/informer.js";
import { holderKey } from "../../callback/holders.js";

export class ProviderJobIndex {
  /** Provider job id → the holder's key, or its keys when several jobs hold it (a collision). */
  private readonly byId = new Map<string, string | string[]>();

  /** Told of every job event, with the object as it was before an update. */
  note(event: InformerEvent, job: MediaJob, old?: MediaJob): void {
    const before = event === "add" ? undefined : old?.status?.providerJobId;
    const now = event === "delete" ? undefined : job.status?.providerJobId;
    if (event === "delete") this.remove(job.status?.providerJobId, holderKey(job));
    else if (before !== now) {
      this.remove(before, holderKey(job));
      if (now !== undefined) this.add(now, holderKey(job));
    }
  }

  holders(providerJobId: string): string[] {
    const h = this.byId.get(providerJobId);
    return h === undefined ? [] : typeof h === "string" ? [h] : [...h];
  }

  private add(id: string, key: string): void {
    const h = this.byId.get(id);
    if (h === undefined) this.byId.set(id, key);
    else if (typeof h === "string") {
      if (h !== key) this.byId.set(id, [h, key]);
    } else if (!h.includes(key)) h.push(key);
  }

  private remove(id: string | undefined, key: string): void {
    if (id === undefined) return;
    const h = this.byId.get(id);
    if (h === key) this.byId.delete(id);
    else if (Array.isArray(h)) {
      const rest = h.filter((k) => k !== key);
      if (rest.length === 0) this.byId.delete(id);
      else this.byId.set(id, rest.length === 1 ? rest[0]! : rest);
    }
  }
}
