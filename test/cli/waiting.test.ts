// A job that waits, as a new user meets it: a MediaJob for a customer without a subscription stays
// Pending with Admitted=False (AccountUnknown). `kubectl media status` and `kubectl media doctor`
// must say so, why, and what to do, instead of "submitted within one tick" and "all ok". And
// doctor's own signature check, against the real sidecar, must leave no PaymentEvent behind.
// The controller and the sidecar run in process against the real control plane; the CLI runs in
// process through its main(), with the environment a user would export.
import { beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { PaymentEvent } from "../../src/crds/paymentevent.js";
import { KubeApi } from "../../src/k8s/api.js";
import { kubectlMedia } from "../support/cli.js";
import { changeBinding } from "../../src/cli/bind.js";
import { activeAccount } from "../support/accounts.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const stack = controllerStackForTests(kc, { name: "cli-waiting", sidecar: true, endpoints: ["asr"] });

beforeAll(async () => {
  // The namespace bills two accounts: cus_nobody, whose subscription is unknown, and cus_ok.
  await activeAccount(api, stack.ns, "cus_ok");
  await changeBinding(api, stack.ns, "cus_nobody", "bind");
  await api.create(
    "mediajobs",
    stack.ns,
    mediaJob("waits", { workload: "asr", account: "cus_nobody", input: { audio: "a.wav" } }) as never,
  );
  await eventually(
    async () =>
      condition(await api.get<MediaJob>("mediajobs", stack.ns, "waits"), "Admitted")?.status === "False",
    { message: "Admitted=False on the job" },
  );
});

/** The CLI with the environment a user would export. */
const media = (args: string[]) =>
  kubectlMedia(args, {
    PATH: process.env.PATH,
    GPU_PROVIDER_API_URL: stack.sim.url,
    GPU_PROVIDER_API_KEY: stack.env.GPU_PROVIDER_API_KEY,
    PAYMENT_PROVIDER_WEBHOOK_SECRET: stack.env.PAYMENT_PROVIDER_WEBHOOK_SECRET,
    MEDIA_ENV: "test",
    WEBHOOKS_URL: stack.sidecar!.url,
  });

const doctorEvents = async (ns?: string) =>
  (await api.list<PaymentEvent>("paymentevents", ns)).items.filter(
    (e) => e.spec.type === "media_orchestrator.doctor",
  );

describe("a job that waits", () => {
  it("status: the verdict follows the conditions, with the reason and the fix", async () => {
    const res = await media(["status", "waits", "-n", stack.ns]);
    expect(res.stdout).toContain("Admitted=False (AccountUnknown)");
    expect(res.stdout).not.toContain("within one tick");
    expect(res.stdout).toContain(
      "Verdict: Pending, and it waits: Admitted=False (AccountUnknown): no subscription state is known for account cus_nobody",
    );
    expect(res.stdout).toMatch(/Next: +the job runs once a subscription event for cus_nobody arrives/);
    expect(res.code).toBe(1);
  });

  it("doctor: lists the waiting job with its reason and fix, and leaves no PaymentEvent behind", async () => {
    const res = await media(["doctor", "-n", stack.ns]);
    expect(res.stdout).toContain("Waiting jobs");
    expect(res.stdout).toContain(
      `[WARN] waiting jobs (Admitted=False (AccountUnknown)): 1 MediaJob(s) Pending: ${stack.ns}/waits (no subscription state is known for account cus_nobody`,
    );
    expect(res.stdout).toContain("Fix: the job runs once a subscription event for cus_nobody arrives");
    // The signature check went through the real sidecar, which recorded the test event; doctor
    // removed the record.
    expect(res.stdout).toMatch(
      /\[ok\] +webhook signature: the sidecar accepted .*; its record \(PaymentEvent pe-\w+\) was removed/,
    );
    expect(await doctorEvents(stack.ns)).toEqual([]);
  });

  it("doctor from another namespace finds the record in the sidecar's namespace and removes it", async () => {
    const elsewhere = await createTestNamespace(kc, "cli-waiting-other");
    const res = await media(["doctor", "-n", elsewhere]);
    expect(res.stdout).toMatch(/\[ok\] +webhook signature: .*was removed/);
    expect(res.stdout).toMatch(/\[ok\] +waiting jobs: no Pending MediaJob is held by a condition/);
    expect(await doctorEvents()).toEqual([]);
  });

  it("status of a job suspended while running: the provider is not asked about a submission not yet made", async () => {
    stack.sim.holdJob("paused-1");
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("paused", {
        workload: "asr",
        id: "paused-1",
        account: "cus_ok",
        input: { audio: "a.wav" },
      }) as never,
    );
    await eventually(
      async () => (await api.get<MediaJob>("mediajobs", stack.ns, "paused"))?.status?.providerJobId,
    );
    await api.mergePatch("mediajobs", stack.ns, "paused", { spec: { suspend: true } });
    await eventually(
      async () =>
        condition(await api.get<MediaJob>("mediajobs", stack.ns, "paused"), "Suspended")?.status === "True",
    );
    const res = await media(["status", "paused", "-n", stack.ns]);
    expect(res.stdout).not.toContain("retry-1");
    expect(res.stdout).not.toContain("NOT_FOUND");
    expect(res.stdout).toMatch(/Status: +not asked: no submission in flight/);
    expect(res.stdout).toContain("Verdict: Pending, and it waits: Suspended=True (Suspended)");
    // Suspended on purpose is not a problem: status exits 0, as doctor counts it ok.
    expect(res.code).toBe(0);
  });
});
