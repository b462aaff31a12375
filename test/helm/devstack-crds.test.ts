// The CRDs `make dev-up` applies can be adopted by the CRD release of docs/helm.md: its install
// command, run as written on a control plane whose CRDs dev-up installed, takes them over instead
// of failing with "invalid ownership metadata".
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, describe, expect, it } from "vitest";
import { CRD_RELEASE_OWNERSHIP, envFile } from "../../scripts/devstack-lib.js";
import { REPO_ROOT, startControlPlane, type RunningControlPlane } from "../support/controlplane.js";
import { installCrds } from "../support/crds.js";
import { HELM_VERSION, helmBinary, helmEnv } from "../support/helm.js";

let cp: RunningControlPlane | undefined;
afterAll(async () => cp?.stop());

describe("helm as the docs write it", () => {
  it("make helm leaves .local/bin/helm, which .local/env puts on PATH", () => {
    const bin = helmBinary();
    expect(readlinkSync(join(REPO_ROOT, ".local/bin/helm"))).toBe(basename(bin));
    const env = join(mkdtempSync(join(tmpdir(), "mo-env-helm-")), "env");
    writeFileSync(
      env,
      envFile({
        kubeconfig: "/nonexistent",
        simulatorUrl: "",
        webhooksUrl: "",
        controllerUrl: "",
        webhookSecret: "",
      }),
    );
    const res = spawnSync("bash", ["-c", `source ${env} && helm version --short`], {
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: process.env.HOME },
      encoding: "utf8",
    });
    expect(res.status, res.stderr).toBe(0);
    expect(res.stdout).toContain(HELM_VERSION);
  });
});

describe("dev-up's CRDs and the CRD release", () => {
  it("helm install media-orchestrator-crds, as docs/helm.md writes it, adopts the CRDs dev-up applied", async () => {
    cp = await startControlPlane({ dataDir: mkdtempSync(join(tmpdir(), "mo-devstack-crds-")) });
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfig);
    await installCrds(kc, undefined, CRD_RELEASE_OWNERSHIP); // as dev-up does

    const helmDoc = readFileSync(join(REPO_ROOT, "docs/helm.md"), "utf8");
    const doc = /^helm install media-orchestrator-crds (?:.*\\\n)*.*$/m
      .exec(helmDoc)![0]
      .replace(/\\\n\s*/g, " ");
    expect(doc).toContain("--set crds.only=true");
    const res = spawnSync("bash", ["-c", doc.replace(/^helm /, `${helmBinary()} `)], {
      cwd: REPO_ROOT,
      env: helmEnv(cp.kubeconfig),
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(res.stderr).not.toContain("invalid ownership metadata");
    expect(res.status, res.stderr).toBe(0);
    expect(res.stdout).toContain("STATUS: deployed");
    // Its NOTES give the next step as docs/helm.md does: the namespace and its Secret first.
    expect(res.stdout).toContain("kubectl -n media-dev create secret generic media-credentials");
    expect(res.stdout).toContain("--set secrets.existingSecret=media-credentials");
    expect(res.stdout).not.toMatch(/helm install mo-dev .*--create-namespace/);
    for (const line of res.stdout
      .split("\n")
      .filter((l) => /^\s+(kubectl create namespace|kubectl -n media-dev|helm install|--)/.test(l)))
      expect(helmDoc, line.trim()).toContain(line.trim());
  }, 180_000);
});
