// The demo's story, as a function of a running stack, so `make demo` and a test run the same
// steps: a pipeline that waits for its customer's subscription, a signed payment event that
// activates it, a replayed delivery that changes nothing, and an ASR callback that goes missing
// and is recovered by the controller. Returns what happened; printing is the caller's business.
import { randomBytes } from "node:crypto";
import type { BillingAccount } from "../src/crds/billingaccount.js";
import { billingAccountName } from "../src/crds/billingaccount.js";
import type { MediaJob } from "../src/crds/mediajob.js";
import type { KubeApi } from "../src/k8s/api.js";
import { changeBinding } from "../src/cli/bind.js";
import { activateCustomer, createManifests, PAYMENT_KEY, SAMPLE_CUSTOMER } from "./devstack-lib.js";
import { samplePipeline } from "./sample-media.js";

export const PIPELINE = ["episode-42", "episode-42-1-tts", "episode-42-2-render"];
export const CUSTOMER = SAMPLE_CUSTOMER;

export interface DemoContext {
  api: KubeApi;
  namespace: string;
  simulatorUrl: string;
  /** The environment's bucket, which holds the sample audio under the namespace (scripts/sample-media.ts). */
  bucket: string;
  /** Called about once a second with the pipeline's jobs, for a live view. */
  onProgress?: (jobs: MediaJob[]) => void;
  say?: (line: string) => void;
  timeoutMs?: number;
}

export interface DemoSummary {
  steps: Array<{
    name: string;
    workload: string;
    phase?: string;
    attempts?: number;
    replay?: boolean;
    runMs?: number;
    waitMs?: number;
    /** The step's stored files, as status.outputs records them. */
    outputs: Array<{ name: string; size: number; sha256?: string }>;
  }>;
  recovered: Array<{ job: string; how: string }>;
  payment: {
    eventId: string;
    firstDelivery?: number;
    replayDelivery?: number;
    accountStatus?: string;
    replayChangedNothing: boolean;
  };
  totalMs: number;
}

async function simulator<T>(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`simulator ${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

interface Attempt {
  httpStatus?: number;
  redelivery: boolean;
}
/** The payment provider's answer to a redeliver call. */
interface Redelivery {
  id: string;
  redelivered: boolean;
  attempt?: Attempt;
}

export async function runDemoScenario(ctx: DemoContext): Promise<DemoSummary> {
  const { api, namespace: ns, simulatorUrl } = ctx;
  const say = ctx.say ?? (() => {});
  const started = Date.now();
  const deadline = started + (ctx.timeoutMs ?? 120_000);
  const jobs = async () =>
    (await Promise.all(PIPELINE.map((n) => api.get<MediaJob>("mediajobs", ns, n)))).filter(
      (j): j is MediaJob => j !== undefined,
    );

  say("the ASR step's callback will go missing (simulator fault: drop callbacks)");
  await simulator(simulatorUrl, "PUT", "/_sim/faults", { dropCallback: 1 });

  // An operator binds the tenant's namespace to the customer it may bill (docs/helm.md).
  say(`binding namespace ${ns} to cus_demo (kubectl media bind ${ns} cus_demo)`);
  await changeBinding(api, ns, CUSTOMER, "bind");

  say("applying config/samples/pipeline.yaml: asr -> tts -> render, billed to cus_demo");
  await createManifests(api, ns, samplePipeline(ns, ctx.bucket));

  // The pipeline waits: no subscription is known for its customer yet.
  const eventId = `evt_demo_${randomBytes(6).toString("hex")}`;
  say(`sending a signed customer.subscription.created event (${eventId}) for cus_demo`);
  const { delivery: first } = await activateCustomer(api, ns, simulatorUrl, CUSTOMER, eventId);
  const account = () => api.get<BillingAccount>("billingaccounts", ns, billingAccountName(CUSTOMER));
  const before = await account();

  say(`redelivering the same event (the runbook's "replay a payment webhook")`);
  const again = await simulator<Redelivery>(
    simulatorUrl,
    "POST",
    `/v1/webhooks/deliveries/${first.id}/redeliver`,
    undefined,
    {
      authorization: `Bearer ${PAYMENT_KEY}`,
    },
  );
  const after = await account();

  let faultsCleared = false;
  for (;;) {
    const current = await jobs();
    ctx.onProgress?.(current);
    const asr = current.find((j) => j.metadata.name === PIPELINE[0]);
    // The ASR step's callback is lost; let the later steps' callbacks through.
    if (!faultsCleared && asr?.status?.phase === "Processing") {
      const atProvider = await simulator<{ status?: string }>(
        simulatorUrl,
        "GET",
        `/_sim/jobs/${asr.status.providerJobId}`,
      ).catch((): { status?: string } => ({}));
      if (atProvider.status === "COMPLETED") {
        await simulator(simulatorUrl, "PUT", "/_sim/faults", {});
        faultsCleared = true;
        say(
          "the provider completed the ASR job; its callback was dropped. The controller will notice after spec.timeoutSeconds",
        );
      }
    }
    // Completed by a callback can come a moment before the controller's record of the submission
    // (submittedAt, attempts): the summary reports each step once both have landed.
    const settled = (j: MediaJob) => j.status?.phase === "Completed" && j.status.submittedAt !== undefined;
    if (current.length === PIPELINE.length && current.every(settled)) break;
    if (current.some((j) => j.status?.phase === "Failed")) break;
    if (Date.now() > deadline)
      throw new Error(
        `the demo pipeline did not finish in time: ${JSON.stringify(current.map((j) => [j.metadata.name, j.status?.phase]))}`,
      );
    await new Promise((r) => setTimeout(r, faultsCleared ? 1000 : 200));
  }
  if (!faultsCleared) await simulator(simulatorUrl, "PUT", "/_sim/faults", {});

  const done = await jobs();
  ctx.onProgress?.(done);
  // The controller writes Events in the background, just after the status they explain: give the
  // recovery's Event a moment to land.
  const recoveries = async () =>
    (await (await api.typed()).core.listNamespacedEvent({ namespace: ns })).items
      .filter(
        (e) =>
          PIPELINE.includes(e.involvedObject.name ?? "") &&
          ["RecoveredMissedCallback", "ProviderLostJob"].includes(e.reason ?? ""),
      )
      .map((e) => ({ job: e.involvedObject.name!, how: `${e.reason}: ${e.message}` }));
  let recovered = await recoveries();
  for (let i = 0; i < 25 && recovered.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 200));
    recovered = await recoveries();
  }
  const finalAccount = await account();
  return {
    steps: done.map((j) => ({
      name: j.metadata.name,
      workload: j.spec.workload,
      phase: j.status?.phase,
      attempts: j.status?.attempts,
      replay: j.status?.replay,
      runMs:
        j.status?.submittedAt && j.status.completedAt
          ? Date.parse(j.status.completedAt) - Date.parse(j.status.submittedAt)
          : undefined,
      waitMs:
        j.status?.submittedAt && j.metadata.creationTimestamp
          ? Date.parse(j.status.submittedAt) - Date.parse(String(j.metadata.creationTimestamp))
          : undefined,
      outputs: (j.status?.outputs ?? []).map((o) => ({
        name: o.name,
        size: o.size,
        ...(o.sha256 !== undefined && { sha256: o.sha256 }),
      })),
    })),
    recovered,
    payment: {
      eventId,
      firstDelivery: first.attempts.at(-1)?.httpStatus,
      replayDelivery: again.attempt?.httpStatus,
      accountStatus: finalAccount?.status?.subscriptionStatus,
      replayChangedNothing:
        before !== undefined && before.metadata.resourceVersion === after?.metadata.resourceVersion,
    },
    totalMs: Date.now() - started,
  };
}
