// make dev-up / make dev-down: the whole local stack in the background.
import { KubeConfig } from "@kubernetes/client-node";
import { billingAccountName } from "../src/crds/billingaccount.js";
import { KubeApi } from "../src/k8s/api.js";
import {
  activateCustomer,
  ENV_FILE,
  LOGS,
  readState,
  SAMPLE_CUSTOMER,
  stackDown,
  stackUp,
} from "./devstack-lib.js";

const cmd = process.argv[2];
if (cmd === "up") {
  const running = readState();
  if (running) {
    console.log(
      `the dev stack is already up (webhooks ${running.webhooksUrl}, simulator ${running.simulatorUrl})`,
    );
    console.log(`  source ${ENV_FILE}`);
  } else {
    await stackDown(); // leftovers of a stack that died
    const s = await stackUp({ detached: true });
    // The sample pipeline bills cus_demo, and a job of an account without an active subscription
    // waits (Admitted=False). The stack makes it active as production would: a signed event from
    // the payment provider (the simulator) to the sidecar.
    const kc = new KubeConfig();
    kc.loadFromFile(s.kubeconfig);
    const { eventId } = await activateCustomer(
      new KubeApi(kc),
      s.namespace,
      s.simulatorUrl,
      SAMPLE_CUSTOMER,
    ).catch((err: unknown) => {
      throw new Error(
        `the stack is up, but ${SAMPLE_CUSTOMER} could not be made active (${err instanceof Error ? err.message : String(err)}); ` +
          `see ${LOGS}/webhooks.log, and make dev-down to stop the stack`,
      );
    });
    console.log(
      `\n${SAMPLE_CUSTOMER} (the sample pipeline's customer) is active: the simulator sent a signed` +
        ` customer.subscription.created event (${eventId}) to the webhooks sidecar, which wrote` +
        ` BillingAccount ${billingAccountName(SAMPLE_CUSTOMER)}.`,
    );
    console.log(`\nthe dev stack is up. Logs: ${LOGS}/`);
    console.log(`  source ${ENV_FILE}`);
    console.log("  kubectl get gpuendpoints");
    console.log("  kubectl apply -f config/samples/pipeline.yaml && kubectl get mediajobs -w");
    console.log(`  curl -s ${s.simulatorUrl}/_sim/stats`);
    console.log("  make dev-down   # stops everything");
  }
} else if (cmd === "down") {
  const was = await stackDown();
  console.log(
    was
      ? "the dev stack is down; its processes are stopped and its data removed"
      : "no dev stack was running",
  );
} else {
  console.error("usage: tsx scripts/devstack.ts up|down");
  process.exitCode = 2;
}
