// The operator's processes: `controller`, `webhooks` (the sidecar) or `all` (both in one process,
// for `make run` and local development). In the cluster the chart runs them as two containers.
// Each mode imports only its own code: the controller's container never loads the sidecar's
// HTTP server (fastify), nor the sidecar the controller's.
import { ConfigError, parseEnv, watchEnvSecretFiles } from "./config/env.js";
import { createLogger } from "./log.js";

async function main(argv: string[]): Promise<void> {
  const mode = argv[0] ?? "all";
  if (!["controller", "webhooks", "all"].includes(mode)) {
    console.error("usage: media-orchestrator controller|webhooks|all");
    process.exit(2);
  }
  let env;
  try {
    env = parseEnv();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
  const log = createLogger(env.LOG_LEVEL, `media-orchestrator-${mode}`);
  const stops: Array<() => Promise<void>> = [];
  let stopping = false;
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log.info({ code }, "shutting down");
    for (const stop of stops.reverse())
      await stop().catch((err) => log.error({ err: String(err) }, "shutdown step failed"));
    process.exit(code);
  };
  process.on("SIGTERM", () => void shutdown(0));
  process.on("SIGINT", () => void shutdown(0));
  // Secrets mounted as files are re-read while the process runs: a rotation needs no restart.
  const secretFiles = watchEnvSecretFiles(env, log);
  stops.push(async () => secretFiles.stop());
  try {
    if (mode === "webhooks" || mode === "all") {
      const { runWebhooks } = await import("./webhooks/run.js");
      stops.push((await runWebhooks(env, log)).stop);
    }
    // The controller collects after its own bursts (runtime/idle-compaction.ts); the sidecar
    // alone after its event loop's.
    if (mode === "webhooks") {
      const { collectWhenIdle } = await import("./idle-collection.js");
      const stop = collectWhenIdle();
      stops.push(async () => stop());
    }
    // Losing the lease ends the process, as controller-runtime does: the pod restarts as a candidate.
    if (mode === "controller" || mode === "all") {
      const { runController } = await import("./controller/run.js");
      stops.push((await runController(env, log, { onLeadershipLost: () => void shutdown(1) })).stop);
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    log.fatal({ err: err instanceof Error ? err.message : String(err) }, "start failed");
    process.exit(1);
  }
}

await main(process.argv.slice(2));
