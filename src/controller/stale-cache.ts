// After a reconcile writes an object, the informer's copy is stale until the watch delivers the
// write. Acting on that copy would repeat work (a second submission) or fail with 409 over and
// over. This remembers, per key, the resourceVersions we wrote over: a cache still showing one of
// them is stale, and the key is looked at again shortly instead.
export class StaleCacheGuard {
  private readonly superseded = new Map<string, Set<string>>();

  isStale(key: string, resourceVersion: string | undefined): boolean {
    return this.superseded.get(key)?.has(resourceVersion ?? "") ?? false;
  }

  /** We replaced `from` with `to`. */
  remember(key: string, from: string | undefined, to: string | undefined): void {
    if (!from || !to) return;
    const set = this.superseded.get(key) ?? new Set<string>();
    set.add(from);
    set.delete(to);
    this.superseded.set(key, set);
  }

  forget(key: string): void {
    this.superseded.delete(key);
  }
}
