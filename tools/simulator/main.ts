import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { pino } from "pino";
import {
  FaultsSchema,
  MeterSpecSchema,
  type EndpointSpec,
  type MeterSpec,
  type SimulatorOptions,
} from "./options.js";
import { startSimulator } from "./server.js";

// Command line: `tsx tools/simulator/main.ts --port 0 --endpoint media-asr-dev ...`. Prints exactly
// one line on stdout, `SIMULATOR_URL=http://127.0.0.1:PORT`, once listening (scripts wait for
// it); logs go to stderr. SIGTERM or SIGINT closes it and exits 0.

const USAGE = `Usage: tsx tools/simulator/main.ts [options]
  --port N                    listen port on 127.0.0.1 (default 0 = any free port)
  --api-key KEY               accepted GPU provider key (repeatable; default sim-key)
  --account-problem-key KEY   key whose account is suspended (repeatable)
  --payment-api-key KEY       key accepted by the payment API (repeatable; default sim-payment-key)
  --endpoint SPEC             NAME[,id=ID][,workload=asr|tts|render][,min=N][,max=N][,idle=SECONDS]
                              [,scaler=QUEUE_DELAY|REQUEST_COUNT][,scaler-value=N] (repeatable)
  --time-scale X              multiply simulated delays (0.01 = 100x faster; default 1)
  --seed N                    seed for faults and generated ids (default 1)
  --cold-start-ms N           worker cold start, simulated ms (default 2000)
  --execution-ms N            job execution, simulated ms (default 3000)
  --status-retention-ms N     status kept after a terminal state, simulated ms (default 1800000)
  --faults JSON               fault set, e.g. '{"dropCallback":0.2,"serverErrors":0.1}'
  --payment-webhook-url URL   where /_sim/payment/send posts signed events
  --payment-webhook-secret S  signing secret for those events
  --meter SPEC                billing meter EVENT_NAME[,id=mtr_ID][,formula=sum|count|last] (repeatable;
                              also customer_key=, value_key=, event_time_window=hour|day)
  --config FILE               JSON file with any SimulatorOptions (flags override it)
  --log-level LEVEL           pino level on stderr (default info)`;

export function parseEndpoint(spec: string): EndpointSpec {
  const [name = "", ...pairs] = spec.split(",").map((s) => s.trim());
  if (name === "") throw new Error(`--endpoint ${spec}: a name is required`);
  const out: EndpointSpec = { name };
  for (const pair of pairs) {
    const [k, v = ""] = pair.split("=", 2);
    const int = () => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0)
        throw new Error(`--endpoint ${spec}: ${k} must be a non-negative integer`);
      return n;
    };
    if (k === "id") out.id = v;
    else if (k === "workload") {
      if (v !== "asr" && v !== "tts" && v !== "render")
        throw new Error(`--endpoint ${spec}: unknown workload ${v}`);
      out.workload = v;
    } else if (k === "min") out.workersMin = int();
    else if (k === "max") out.workersMax = int();
    else if (k === "idle") out.idleTimeout = int();
    else if (k === "scaler") {
      if (v !== "QUEUE_DELAY" && v !== "REQUEST_COUNT")
        throw new Error(`--endpoint ${spec}: scaler must be QUEUE_DELAY or REQUEST_COUNT`);
      out.scalerType = v;
    } else if (k === "scaler-value") {
      out.scalerValue = int();
      if (out.scalerValue < 1) throw new Error(`--endpoint ${spec}: scaler-value must be at least 1`);
    } else throw new Error(`--endpoint ${spec}: unknown key ${k}`);
  }
  return out;
}

export function parseMeter(spec: string): MeterSpec {
  const [eventName = "", ...pairs] = spec.split(",").map((s) => s.trim());
  const out: Record<string, string> = { event_name: eventName };
  for (const pair of pairs) {
    const [k = "", v = ""] = pair.split("=", 2);
    if (!["id", "formula", "customer_key", "value_key", "event_time_window"].includes(k))
      throw new Error(`--meter ${spec}: unknown key ${k}`);
    out[k] = v;
  }
  const parsed = MeterSpecSchema.safeParse(out);
  if (!parsed.success)
    throw new Error(`--meter ${spec}: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  return parsed.data;
}

function number(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n)) throw new Error(`--${flag} must be a number`);
  return n;
}

export function optionsFromArgs(argv: string[]): SimulatorOptions & { logLevel: string } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      port: { type: "string" },
      "api-key": { type: "string", multiple: true },
      "account-problem-key": { type: "string", multiple: true },
      "payment-api-key": { type: "string", multiple: true },
      endpoint: { type: "string", multiple: true },
      "time-scale": { type: "string" },
      seed: { type: "string" },
      "cold-start-ms": { type: "string" },
      "execution-ms": { type: "string" },
      "status-retention-ms": { type: "string" },
      faults: { type: "string" },
      "payment-webhook-url": { type: "string" },
      "payment-webhook-secret": { type: "string" },
      meter: { type: "string", multiple: true },
      config: { type: "string" },
      "log-level": { type: "string" },
      help: { type: "boolean" },
    },
  });
  if (values.help === true) {
    console.log(USAGE);
    process.exit(0);
  }
  const base = (
    values.config === undefined ? {} : JSON.parse(readFileSync(values.config, "utf8"))
  ) as SimulatorOptions;
  const opts: SimulatorOptions = { ...base };
  const set = <K extends keyof SimulatorOptions>(k: K, v: SimulatorOptions[K] | undefined) => {
    if (v !== undefined) opts[k] = v;
  };
  set("port", number("port", values.port));
  set("apiKeys", values["api-key"]);
  set("accountProblemKeys", values["account-problem-key"]);
  set("paymentApiKeys", values["payment-api-key"]);
  set("endpoints", values.endpoint?.map(parseEndpoint));
  set("meters", values.meter?.map(parseMeter));
  set("timeScale", number("time-scale", values["time-scale"]));
  set("seed", number("seed", values.seed));
  set("coldStartMs", number("cold-start-ms", values["cold-start-ms"]));
  set("executionMs", number("execution-ms", values["execution-ms"]));
  set("statusRetentionMs", number("status-retention-ms", values["status-retention-ms"]));
  if (values.faults !== undefined) opts.faults = FaultsSchema.parse(JSON.parse(values.faults));
  const url = values["payment-webhook-url"];
  const secret = values["payment-webhook-secret"];
  if ((url === undefined) !== (secret === undefined)) {
    throw new Error("--payment-webhook-url and --payment-webhook-secret go together");
  }
  if (url !== undefined && secret !== undefined) opts.paymentWebhook = { url, secret };
  return { ...opts, logLevel: values["log-level"] ?? "info" };
}

async function main(): Promise<void> {
  let options: ReturnType<typeof optionsFromArgs>;
  try {
    options = optionsFromArgs(process.argv.slice(2));
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    process.exit(2);
  }
  const { logLevel, ...simOptions } = options;
  const logger = pino({ level: logLevel, base: { component: "gpu-simulator" } }, pino.destination(2));
  const sim = await startSimulator({ ...simOptions, logger });
  process.stdout.write(`SIMULATOR_URL=${sim.url}\n`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping simulator");
    sim.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, "simulator did not close cleanly");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

// Run only when executed, not when imported by tests.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  void main();
}
