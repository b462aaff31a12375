// Tenancy against the real control plane, its RBAC and the admission policies the CRD install
// ships (test/support/crds.ts): a tenant holds the chart's own user roles (the CRD release's
// aggregated ClusterRoles, rendered by helm) in its namespace and acts through impersonation, as
// `kubectl --as` does. A namespace bills only the accounts an operator bound it to; the product's
// annotations, labels and finalizers stay the operators'; the controller refuses an unbound
// account itself where no policy ran, and meters a job to the account its namespace supplies.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RbacAuthorizationV1Api } from "@kubernetes/client-node";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { billingAccountName, type BillingAccount } from "../../src/crds/billingaccount.js";
import { KubeApi, type KubeObject } from "../../src/k8s/api.js";
import { readAccountsSummary } from "../../src/mediajob/tenancy.js";
import { impersonating } from "../../src/k8s/config.js";
import { kubeError } from "../../src/k8s/errors.js";
import { changeBinding } from "../../src/cli/bind.js";
import { activeAccount } from "../support/accounts.js";
import { helmTemplate } from "../support/helm.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import {
  condition,
  controllerStackForTests,
  mediaJob,
  meteredStackOptions,
  waitForPhase,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
// The metered stack's meter kept: without one the controller holds the usage (MetersConfigured).
const metered = meteredStackOptions("tenancy");
const stack = controllerStackForTests(kc, { ...metered, sim: { ...metered.sim, executionMs: 1_000 } });
/** The tenant: the chart's `edit` and `view` user roles in the stack's namespace, nothing else. */
const ALICE = "alice-tenancy";
const alice = new KubeApi(impersonating(kc, ALICE));
const roles: string[] = [];

/** The HTTP status and message a call ends with. */
async function outcome(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
    return { code: 200, message: "" };
  } catch (err) {
    const k = kubeError(err);
    if (!k) throw err;
    return { code: k.code, message: k.message };
  }
}

beforeAll(async () => {
  const ns = stack.ns;
  await activeAccount(api, ns, "cus_alice"); // binds the namespace to cus_alice
  await activeAccount(api, ns, "cus_bob");
  await changeBinding(api, ns, "cus_bob", "unbind"); // bob's account exists, but not for this namespace
  // The CRD release's user roles, as helm renders them, named for this test run.
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const rendered = helmTemplate("media-orchestrator-crds", "media-system", [
    "--set",
    "crds.only=true",
  ]).filter(
    (m) =>
      m.kind === "ClusterRole" &&
      m.metadata.labels?.["rbac.authorization.k8s.io/aggregate-to-edit"] === "true",
  );
  expect(rendered.map((r) => r.metadata.name).sort()).toEqual([
    "media-orchestrator-edit",
    "media-orchestrator-view",
  ]);
  for (const role of rendered) {
    const name = `${role.metadata.name}-${ns}`;
    roles.push(name);
    await rbac.createClusterRole({ body: { metadata: { name }, rules: role.rules as never } });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
        subjects: [{ kind: "User", name: ALICE, apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
  }
}, 60_000);

afterAll(async () => {
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  for (const name of roles) await rbac.deleteClusterRole({ name }).catch(() => undefined);
});

const getJob = (name: string) => api.get<MediaJob>("mediajobs", stack.ns, name);

describe("a namespace bills only the accounts bound to it", () => {
  it("a tenant naming another customer's account is refused at admission, told which binding to ask for", async () => {
    const { code, message } = await outcome(
      alice.create(
        "mediajobs",
        stack.ns,
        mediaJob("bill-bob", { workload: "asr", account: "cus_bob" }) as never,
      ),
    );
    expect(code).toBe(403);
    expect(message).toContain(`namespace ${stack.ns} is not bound to account cus_bob`);
    expect(message).toContain(`kubectl media bind ${stack.ns} cus_bob`);
    expect(await getJob("bill-bob")).toBeUndefined();
    expect(stack.sim.stats().submissions).toBe(0);
  });

  it("a tenant's job without an account is billed to the namespace's one account, and metered to it", async () => {
    expect(
      (await outcome(alice.create("mediajobs", stack.ns, mediaJob("own", { workload: "asr" }) as never)))
        .code,
    ).toBe(200);
    await waitForPhase(api, stack.ns, "own", "Completed", 30_000);
    const job = await eventually(async () => {
      const j = await getJob("own");
      return j?.status?.usage?.attempts?.[0]?.meter === "Reported" ? j : undefined;
    });
    expect(job.status?.account).toBe("cus_alice");
    expect(job.status?.usage?.account).toBe("cus_alice");
    expect(stack.sim.meterEvents().map((e) => e.customer)).toEqual(["cus_alice"]);
  });

  it("the controller refuses an unbound account itself (no policy ran): AccountNotBound, one Event, no write per tick", async () => {
    const ns = stack.ns;
    // Bound when created (admission let it through), unbound before it could run: what a cluster
    // without the policy would have let in.
    await activeAccount(api, ns, "cus_carol");
    await api.create(
      "mediajobs",
      ns,
      mediaJob("carol", { workload: "asr", account: "cus_carol", suspend: true }) as never,
    );
    await changeBinding(api, ns, "cus_carol", "unbind");
    await eventually(async () => (stack.manager.boundAccounts(ns).includes("cus_carol") ? undefined : true));
    const runsBefore = stack.sim.stats().submissions;
    await api.mergePatch("mediajobs", ns, "carol", { spec: { suspend: false } });
    const held = await eventually(async () => {
      const j = await getJob("carol");
      return condition(j, "Admitted")?.reason === "AccountNotBound" ? j : undefined;
    });
    expect(condition(held, "Admitted")?.message).toContain(`kubectl media bind ${ns} cus_carol`);
    // Three ticks later: not submitted, not written again, told once.
    await new Promise((r) => setTimeout(r, 3_000));
    const later = await getJob("carol");
    expect(later?.metadata.resourceVersion).toBe(held.metadata.resourceVersion);
    expect(later?.status?.phase ?? "Pending").toBe("Pending");
    expect(stack.sim.stats().submissions - runsBefore).toBe(0);
    const told = (await eventsOf(kc, ns, "carol")).filter((e) => e.reason === "AccountNotBound");
    expect(told).toHaveLength(1);
    expect(told[0]?.type).toBe("Warning");
    // Bound again: the job goes at once, not at the next tick.
    await changeBinding(api, ns, "cus_carol", "bind");
    await waitForPhase(api, ns, "carol", "Completed", 30_000);
  });
});

describe("what a tenant reads of its accounts", () => {
  it("its Namespace carries its own accounts' plan and period usage, kept by the controller, and no other customer's", async () => {
    const ns = stack.ns;
    // What the built-in `view` gives a namespace's users of their own Namespace: get.
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const name = `namespace-read-${ns}`;
    roles.push(name);
    await rbac.createClusterRole({
      body: { metadata: { name }, rules: [{ apiGroups: [""], resources: ["namespaces"], verbs: ["get"] }] },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
        subjects: [{ kind: "User", name: ALICE, apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
    // Written at the tick: the summary follows the account's period usage.
    const summary = await eventually(
      async () => {
        const account = await api.get<BillingAccount>("billingaccounts", ns, billingAccountName("cus_alice"));
        const seen = await alice.get<KubeObject>("namespaces", "", ns);
        const read = readAccountsSummary(seen?.metadata.annotations as Record<string, string> | undefined);
        const used = account?.status?.usage?.usedSeconds;
        return used !== undefined && read.cus_alice?.usedSeconds === used ? read : undefined;
      },
      { timeoutMs: 30_000 },
    );
    // Only accounts the namespace is bound to (cus_alice, and cus_carol of the test above): never
    // cus_bob's, whose account lives beside them.
    expect(Object.keys(summary)).toContain("cus_alice");
    for (const customer of Object.keys(summary)) expect(["cus_alice", "cus_carol"]).toContain(customer);
    expect(summary.cus_alice).toMatchObject({ subscription: "active" });
    // The tenant cannot write it.
    const { code } = await outcome(
      alice.mergePatch("namespaces", "", ns, {
        metadata: { annotations: { "media-orchestrator.io/accounts-usage": "{}" } },
      }),
    );
    expect(code).toBe(403);
  });
});

describe("what only operators may do", () => {
  it("a tenant may not set, change or remove the product's annotations, nor its finalizers; its own edits still go", async () => {
    const ns = stack.ns;
    await api.create(
      "mediajobs",
      ns,
      mediaJob("guarded", { workload: "asr", account: "cus_alice", suspend: true }) as never,
    );
    for (const annotation of [
      "media-orchestrator.io/skip-provider-cancel",
      "media-orchestrator.io/skip-usage-report",
      "media-orchestrator.io/accepted-provider-job",
      "media-orchestrator.io/anything-else",
    ]) {
      const { code, message } = await outcome(
        alice.mergePatch("mediajobs", ns, "guarded", { metadata: { annotations: { [annotation]: "true" } } }),
      );
      expect(code, annotation).toBe(403);
      expect(message).toContain("only an operator may set, change or remove them");
    }
    expect(
      (
        await outcome(
          alice.mergePatch("mediajobs", ns, "guarded", {
            metadata: { labels: { "media-orchestrator.io/pipeline": "someone-elses" } },
          }),
        )
      ).code,
    ).toBe(403);
    // Its own labels, annotations and spec edits are not the product's: they go.
    expect(
      (
        await outcome(
          alice.mergePatch("mediajobs", ns, "guarded", {
            metadata: { labels: { team: "audio" }, annotations: { note: "mine" } },
          }),
        )
      ).code,
    ).toBe(200);
    // An operator (the admin's group) may set them.
    await api.mergePatch("mediajobs", ns, "guarded", {
      metadata: { annotations: { "media-orchestrator.io/skip-usage-report": "true" } },
    });
    expect(
      (
        await outcome(
          alice.mergePatch("mediajobs", ns, "guarded", {
            metadata: { annotations: { "media-orchestrator.io/skip-usage-report": null } },
          }),
        )
      ).code,
    ).toBe(403);

    // A running job's finalizer: only the controller (or an operator) takes it off. The provider
    // holds the job (it runs until released).
    const jobId = (await getJob("guarded"))!.metadata.uid!;
    stack.sim.holdJob(jobId);
    await alice.mergePatch("mediajobs", ns, "guarded", { spec: { suspend: false } });
    const running = await waitForPhase(api, ns, "guarded", "Processing", 20_000);
    expect(running.metadata.finalizers).toContain("media-orchestrator.io/cancel-at-provider");
    const { code, message } = await outcome(
      alice.mergePatch("mediajobs", ns, "guarded", {
        metadata: { finalizers: null, resourceVersion: running.metadata.resourceVersion },
      }),
    );
    expect(code).toBe(403);
    expect(message).toContain("only an operator may remove them");
    stack.sim.releaseJob(jobId);
    // Deleting is the tenant's right: the controller still cancels or waits for usage first.
    expect((await outcome(alice.delete("mediajobs", ns, "guarded"))).code).toBe(200);
    await eventually(async () => ((await getJob("guarded")) === undefined ? true : undefined), {
      timeoutMs: 30_000,
    });
  });

  it("a tenant cannot bind its namespace to an account", async () => {
    const { code } = await outcome(
      alice.mergePatch("namespaces", "", stack.ns, {
        metadata: { annotations: { "media-orchestrator.io/accounts": "cus_alice,cus_bob" } },
      }),
    );
    expect(code).toBe(403);
  });
});

describe("nothing billable escapes", () => {
  it("a running job an operator deletes without a cancel is followed at the provider, billed and metered once", async () => {
    const ns = stack.ns;
    await api.create("mediajobs", ns, mediaJob("left", { workload: "asr", account: "cus_alice" }) as never);
    const uid = (await getJob("left"))!.metadata.uid!;
    stack.sim.holdJob(uid);
    const running = await waitForPhase(api, ns, "left", "Processing", 20_000);
    const providerJobId = await eventually(async () => (await getJob("left"))?.status?.providerJobId);
    // An operator lets it go on at the provider (the tenant may not: see above), and deletes it.
    await api.mergePatch("mediajobs", ns, "left", {
      metadata: { annotations: { "media-orchestrator.io/skip-provider-cancel": "true" } },
    });
    await api.delete("mediajobs", ns, "left");
    await eventually(async () => ((await getJob("left")) === undefined ? true : undefined), {
      timeoutMs: 20_000,
    });
    expect(running.metadata.uid).toBe(uid);
    // The record outlives the job, on its account; a Warning told it.
    const account = () => api.get<BillingAccount>("billingaccounts", ns, billingAccountName("cus_alice"));
    expect((await account())?.status?.orphans).toEqual([
      expect.objectContaining({ uid, name: "left", providerJobId, attempt: 1, account: "cus_alice" }),
    ]);
    expect((await eventsOf(kc, ns, "left")).map((e) => [e.type, e.reason])).toContainEqual([
      "Warning",
      "RunLeftAtProvider",
    ]);
    const usedBefore = (await account())?.status?.usage?.usedSeconds ?? 0;
    // The provider runs it to its end: billed from the provider's own figures, metered once.
    stack.sim.releaseJob(uid);
    await eventually(async () => ((await account())?.status?.orphans === undefined ? true : undefined), {
      timeoutMs: 30_000,
    });
    const atProvider = stack.sim.getJob(providerJobId)!;
    expect(atProvider.status).toBe("COMPLETED");
    const seconds = Math.ceil(atProvider.executionTime! / 1000);
    const events = stack.sim.meterEvents().filter((e) => e.identifier === `mj_${uid}_1`);
    expect(events.map((e) => [e.customer, e.value])).toEqual([["cus_alice", seconds]]);
    expect((await account())?.status?.usage?.usedSeconds).toBe(usedBefore + seconds);
  });
});

describe("a namespace bound to no account, with metering on", () => {
  it("a job naming no account is refused by the controller, never submitted", async () => {
    const ns = stack.ns;
    for (const account of ["cus_alice", "cus_carol"]) await changeBinding(api, ns, account, "unbind");
    // The controller acts on its cache of the Namespace: wait until it shows the change.
    await eventually(async () => (stack.manager.boundAccounts(ns).length === 0 ? true : undefined));
    const runsBefore = stack.sim.stats().submissions;
    await api.create("mediajobs", ns, mediaJob("nobody", { workload: "asr" }) as never);
    const held = await eventually(async () => {
      const j = await getJob("nobody");
      return condition(j, "Admitted")?.reason === "AccountNotBound" ? j : undefined;
    });
    expect(condition(held, "Admitted")?.message).toContain("bound to no account");
    await new Promise((r) => setTimeout(r, 2_000));
    expect(stack.sim.stats().submissions - runsBefore).toBe(0);
    expect((await getJob("nobody"))?.status?.usage).toBeUndefined();
  });
});
