// vitest global setup: one real control plane per test run, the project's CRDs installed and
// Established. Test files read its kubeconfig with inject("kubeconfig") (see test/support/kube.ts).
// Set TEST_KUBECONFIG to reuse a running control plane (e.g. after `make cluster-up`) instead.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import type { TestProject } from "vitest/node";
import { startControlPlane } from "../support/controlplane.js";
import { installCrds } from "../support/crds.js";
import { waitForServed } from "../support/kube.js";

declare module "vitest" {
  export interface ProvidedContext {
    kubeconfig: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let kubeconfig = process.env.TEST_KUBECONFIG;
  let stop = async () => {};
  if (!kubeconfig) {
    const started = Date.now();
    const cp = await startControlPlane({ dataDir: mkdtempSync(join(tmpdir(), "mo-controlplane-")) });
    kubeconfig = cp.kubeconfig;
    stop = cp.stop;
    process.stderr.write(`control plane ready at ${cp.url} in ${Date.now() - started} ms\n`);
  }
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  await installCrds(kc);
  await waitForServed(kc);
  project.provide("kubeconfig", kubeconfig);
  return stop;
}
