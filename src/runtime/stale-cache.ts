// After a reconcile writes an object, the informer's copy is stale until the watch delivers the
// write. Acting on that copy would repeat work (a second submission) or fail with 409 over and
// over. This remembers, per key, the resourceVersions we wrote over: a cache still showing one of
// them is stale, and the key is looked at again shortly instead.
//
// One entry per active object: most keys hold one superseded version, kept as the value itself; a
// key with more holds an array of them. resourceVersions are opaque strings, compared as they came.
type Superseded = string | readonly string[];

const asList = (held: Superseded | undefined): readonly string[] =>
  held === undefined ? [] : typeof held === "object" ? held : [held];

/** `list` without `version`, a new array when it changes. */
function without(list: readonly string[], version: string): readonly string[] {
  const i = list.indexOf(version);
  return i < 0 ? list : list.slice(0, i).concat(list.slice(i + 1));
}

export class StaleCacheGuard {
  private readonly superseded = new Map<string, Superseded>();

  isStale(key: string, resourceVersion: string | undefined): boolean {
    const held = this.superseded.get(key);
    if (held === undefined || resourceVersion === undefined) return false;
    return typeof held === "object" ? held.includes(resourceVersion) : held === resourceVersion;
  }

  /** We replaced `from` with `to`. */
  remember(key: string, from: string | undefined, to: string | undefined): void {
    if (!from || !to) return;
    let list = asList(this.superseded.get(key));
    if (!list.includes(from)) list = list.concat(from);
    list = without(list, to);
    if (list.length === 0) this.superseded.delete(key);
    else this.superseded.set(key, list.length === 1 ? list[0]! : list);
  }

  forget(key: string): void {
    this.superseded.delete(key);
  }
}
