// Files of the local stack that hold a credential (.local/kubeconfig: a system:masters token;
// .local/devstack.json and .local/env: the webhook signing secret) are the user's alone: written
// 0600 into a fresh file that replaces the old one whole, so neither a file left 0644 by an earlier
// run nor a reader during the write ever sees the content with other permissions.
import { chmodSync, renameSync, rmSync, writeFileSync } from "node:fs";

export function writePrivateFile(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.${process.pid}.tmp`;
  rmSync(tmp, { force: true });
  writeFileSync(tmp, data, { mode: 0o600, flag: "wx" });
  chmodSync(tmp, 0o600); // whatever the umask
  renameSync(tmp, path);
}
