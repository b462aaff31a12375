// make demo: the main job end to end on the embedded default. Brings the local stack up, runs the
// demo scenario (scripts/demo-scenario.ts) with a live table, prints a summary and the commands to
// look around, and stops everything it started: in a terminal once the user presses Enter (the
// commands need the stack), otherwise at once, and on Ctrl-C. `make demo DEMO_ARGS=--keep` leaves
// it running.
import { existsSync, readdirSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import type { MediaJob } from "../src/crds/mediajob.js";
import { KubeApi } from "../src/k8s/api.js";
import { ENV_FILE, LOGS, readState, stackDown, stackUp } from "./devstack-lib.js";
import { runDemoScenario, type DemoSummary } from "./demo-scenario.js";
import { mediaJobTable, waitForEnter } from "./demo-view.js";

/** How long the stack stays up for the look-around when no one presses Enter. */
const LOOK_AROUND_MINUTES = 15;

const keep = process.argv.includes("--keep");
const tty = process.stdout.isTTY;
const bold = (s: string) => (tty ? `\x1b[1m${s}\x1b[0m` : s);
const green = (s: string) => (tty ? `\x1b[32m${s}\x1b[0m` : s);

let printed = 0;
let lastText = "";
function show(jobs: MediaJob[]): void {
  const lines = mediaJobTable(jobs);
  const text = lines.join("\n");
  if (text === lastText) return;
  if (tty && printed) process.stdout.write(`\x1b[${printed}A\x1b[0J`);
  else if (!tty && lastText) process.stdout.write("\n");
  process.stdout.write(`${text}\n`);
  printed = lines.length;
  lastText = text;
}

function summary(s: DemoSummary): void {
  console.log(`\n${bold("Summary")}`);
  const done = s.steps.filter((x) => x.phase === "Completed").length;
  console.log(`  ${done}/${s.steps.length} pipeline steps completed in ${(s.totalMs / 1000).toFixed(1)} s`);
  for (const x of s.steps) {
    const run = x.runMs === undefined ? "?" : `${(x.runMs / 1000).toFixed(1)} s`;
    const wait = x.waitMs === undefined ? "?" : `${(x.waitMs / 1000).toFixed(1)} s`;
    console.log(
      `  - ${x.name.padEnd(22)} ${x.workload.padEnd(7)} waited ${wait.padStart(6)}, ran ${run.padStart(6)}, attempts ${x.attempts}`,
    );
    for (const o of x.outputs)
      console.log(
        `      stored ${o.name} (${o.size} bytes, sha256 ${o.sha256?.slice(0, 16) ?? "not reported"}…)`,
      );
  }
  console.log(`  recovered without an operator:`);
  for (const r of s.recovered) console.log(`  - ${r.job}: ${r.how}`);
  if (!s.recovered.length) console.log("  - (nothing needed recovering)");
  const p = s.payment;
  console.log(
    `  payment event ${p.eventId}: first delivery HTTP ${p.firstDelivery}, account cus_demo is ${p.accountStatus}`,
  );
  console.log(
    `  replayed delivery: HTTP ${p.replayDelivery}, ${p.replayChangedNothing ? green("changed nothing") : "CHANGED STATE (unexpected)"} (BillingAccount resourceVersion unchanged)`,
  );
}

/** The kubectl commands to look at what the demo did (run while the stack is up). */
function lookAround(kubeconfig: string): void {
  console.log(`\n${bold("Look around")}`);
  console.log(keep ? `  source ${ENV_FILE}` : `  export KUBECONFIG=${kubeconfig}`);
  console.log("  kubectl get media                    # every MediaJob and GpuEndpoint");
  console.log("  kubectl get mediajobs -o wide        # job ids, provider ids, replay");
  console.log("  kubectl describe mediajob episode-42 # conditions and Events, the recovery among them");
  console.log("  kubectl get paymentevents,billingaccounts");
  console.log(`  source ${ENV_FILE} && PATH=$PWD/bin:$PATH kubectl media outputs episode-42-2-render`);
  console.log("                                       # the rendered file: size, SHA-256, a download URL");
  console.log(`  logs: ${LOGS}/`);
}

async function main(): Promise<number> {
  if (readState()) {
    console.error("a dev stack is already running (make dev-up); stop it with `make dev-down` first");
    return 1;
  }
  await stackDown(); // leftovers
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    if (!keep || code !== 0) {
      console.log("\nstopping everything the demo started...");
      await stackDown();
    }
    process.exit(code);
  };
  process.on("SIGINT", () => void stop(130));
  process.on("SIGTERM", () => void stop(143));

  console.log(
    bold("media-orchestrator demo: a real kube-apiserver, the GPU provider simulator, the operator\n"),
  );
  const state = await stackUp({ detached: keep });
  const kc = new KubeConfig();
  kc.loadFromFile(state.kubeconfig);
  const api = new KubeApi(kc);
  console.log(`\n${bold("The pipeline")} (kubectl get mediajobs):`);
  const result = await runDemoScenario({
    api,
    namespace: state.namespace,
    simulatorUrl: state.simulatorUrl,
    bucket: state.storage!.bucket,
    onProgress: show,
    say: (line) => {
      printed = 0; // keep narration above the next table
      lastText = "";
      console.log(`  > ${line}`);
    },
  });
  summary(result);
  lookAround(state.kubeconfig);
  const ok =
    result.steps.length === 3 &&
    result.steps.every((x) => x.phase === "Completed" && x.outputs.every((o) => o.sha256 !== undefined)) &&
    result.payment.replayChangedNothing;
  console.log(ok ? green("\ndemo finished: all green") : "\ndemo finished with problems (see above)");
  if (keep) {
    console.log(`\nthe stack keeps running: source ${ENV_FILE}; stop it with make dev-down`);
  } else if (process.stdin.isTTY) {
    // The commands above need the stack: it stays up until the user is done.
    console.log(
      `\nthe stack is still up for the commands above: press Enter to stop it (make demo DEMO_ARGS=--keep leaves it running);` +
        ` it stops by itself in ${LOOK_AROUND_MINUTES} minutes or when the input ends`,
    );
    const why = await waitForEnter(process.stdin, LOOK_AROUND_MINUTES * 60_000);
    if (why !== "enter")
      console.log(why === "timeout" ? `${LOOK_AROUND_MINUTES} minutes passed` : "the input ended");
  } else {
    console.log(
      "\nthe stack stops now; to run the commands above on it, run make demo DEMO_ARGS=--keep (stop it later with make dev-down)",
    );
  }
  await stop(ok ? 0 : 1);
  return ok ? 0 : 1;
}

main().catch(async (err) => {
  // The logs folder is named only when a process of the stack wrote to it.
  const logged = existsSync(LOGS) && readdirSync(LOGS).length > 0;
  console.error(
    `demo failed: ${err instanceof Error ? err.message : String(err)}${logged ? `\nlogs: ${LOGS}/` : ""}`,
  );
  await stackDown();
  process.exit(1);
});
