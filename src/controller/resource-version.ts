// A resourceVersion as the controller's per-object memory keeps it. The apiserver promises only an
// opaque string, but etcd hands out decimal revisions: a short decimal one is kept as a small
// integer, stored inside the object or array that holds it, instead of as a string of its own
// (24 bytes of heap each). Any other value is kept as it came. The mapping is one to one: a value
// is kept as a number only when it is the canonical decimal form of that number, so comparing
// kept values compares the strings, and reading one back gives the same string.

export type KeptVersion = string | number;

const SMALL_DECIMAL = /^[1-9][0-9]{0,8}$/;

export function keptVersion(resourceVersion: string): KeptVersion;
export function keptVersion(resourceVersion: string | undefined): KeptVersion | undefined;
export function keptVersion(resourceVersion: string | undefined): KeptVersion | undefined {
  return resourceVersion !== undefined && SMALL_DECIMAL.test(resourceVersion)
    ? Number(resourceVersion)
    : resourceVersion;
}

export function versionString(kept: KeptVersion): string;
export function versionString(kept: KeptVersion | undefined): string | undefined;
export function versionString(kept: KeptVersion | undefined): string | undefined {
  return typeof kept === "number" ? String(kept) : kept;
}
