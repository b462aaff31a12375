// The local stack's credential files (.local/kubeconfig, .local/devstack.json, .local/env) are
// readable by their owner only, also when an earlier run left one readable by everyone.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writePrivateFile } from "../../scripts/private-file.js";

const mode = (path: string) => statSync(path).mode & 0o777;

describe("the dev stack's credential files", () => {
  it("are written 0600, replacing a file left 0644, with nothing left beside them", () => {
    const dir = mkdtempSync(join(tmpdir(), "mo-private-"));
    const fresh = join(dir, "kubeconfig");
    writePrivateFile(fresh, "token: system-masters");
    expect(mode(fresh)).toBe(0o600);

    const old = join(dir, "devstack.json");
    writeFileSync(old, '{"webhookSecret":"whsec_old"}');
    chmodSync(old, 0o644);
    writePrivateFile(old, '{"webhookSecret":"whsec_new"}');
    expect(mode(old)).toBe(0o600);
    expect(readFileSync(old, "utf8")).toBe('{"webhookSecret":"whsec_new"}');
    expect(readdirSync(dir).sort()).toEqual(["devstack.json", "kubeconfig"]);
  });
});
