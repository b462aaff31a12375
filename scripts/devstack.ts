// make dev-up / make dev-down: the whole local stack in the background.
import { ENV_FILE, LOGS, readState, stackDown, stackUp } from "./devstack-lib.js";

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
