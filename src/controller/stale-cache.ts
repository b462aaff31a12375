// After a reconcile writes an object, the informer's copy is stale until the watch delivers the
// write. Acting on that copy would repeat work (a second submission) or fail with 409 over and
// over. This remembers, per key, the resourceVersions we wrote over: a cache still showing one of
// them is stale, and the key is looked at again shortly instead.
//
// One entry per active object, so each is kept small: most keys hold one superseded version, kept
// as the value itself; a key with more holds an array of exactly their number (never grown in
// place, which would leave spare room), and versions are kept as resource-version.ts keeps them.
import { keptVersion, type KeptVersion } from "./resource-version.js";

type Superseded = KeptVersion | readonly KeptVersion[];

const asList = (held: Superseded | undefined): readonly KeptVersion[] =>
  held === undefined ? [] : typeof held === "object" ? held : [held];

/** `list` without `version`, a new array of exactly the right length when it changes. */
function without(list: readonly KeptVersion[], version: KeptVersion): readonly KeptVersion[] {
  const i = list.indexOf(version);
  return i < 0 ? list : list.slice(0, i).concat(list.slice(i + 1));
}

export class StaleCacheGuard {
  private readonly superseded = new Map<string, Superseded>();

  isStale(key: string, resourceVersion: string | undefined): boolean {
    const held = this.superseded.get(key);
    if (held === undefined || resourceVersion === undefined) return false;
    const version = keptVersion(resourceVersion);
    return typeof held === "object" ? held.includes(version) : held === version;
  }

  /** We replaced `from` with `to`. */
  remember(key: string, from: string | undefined, to: string | undefined): void {
    if (!from || !to) return;
    const replaced = keptVersion(from);
    let list = asList(this.superseded.get(key));
    if (!list.includes(replaced)) list = list.concat(replaced);
    list = without(list, keptVersion(to));
    if (list.length === 0) this.superseded.delete(key);
    else this.superseded.set(key, list.length === 1 ? list[0]! : list);
  }

  forget(key: string): void {
    this.superseded.delete(key);
  }
}
