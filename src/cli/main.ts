// The dispatcher: parse the command line, run one command, turn every failure into a message that
// says what to do next, and an exit code scripts can trust (0 fine, 1 problem, 2 usage).
import { kubeError } from "../k8s/errors.js";
import { parseCommandLine, type CommandName } from "./args.js";
import { CliContext } from "./context.js";
import { isProviderError } from "../provider/errors.js";
import { CliError, EXIT_PROBLEM, EXIT_USAGE, providerProblem, UsageError } from "./errors.js";
import { Output, type Streams } from "./output.js";

type Command = { run(ctx: CliContext): Promise<number> };

// Loaded on demand: commands that never touch Kubernetes do not pay for its client.
const COMMANDS: Record<CommandName, () => Promise<Command>> = {
  "check-key": () => import("./check-key.js"),
  status: () => import("./status.js"),
  stuck: () => import("./stuck.js"),
  queue: () => import("./queue.js"),
  reset: () => import("./reset.js"),
  complete: () => import("./complete.js"),
  recover: () => import("./recover.js"),
  redeliver: () => import("./redeliver.js"),
  doctor: () => import("./doctor.js"),
  accept: () => import("./accept.js"),
  cancel: () => import("./cancel.js"),
  usage: () => import("./usage.js"),
  storage: () => import("./storage.js"),
  outputs: () => import("./outputs.js"),
  bind: () => import("./bind.js"),
  unbind: () => import("./bind.js"),
};

export async function main(
  argv: string[],
  environment: NodeJS.ProcessEnv = process.env,
  streams: Streams = process,
): Promise<number> {
  // Until the format is known, errors go to stderr as text; secrets in the environment are masked.
  let out = new Output("table", streams);
  let ctx: CliContext | undefined;
  try {
    const parsed = parseCommandLine(argv);
    if ("help" in parsed) {
      out.line(parsed.help);
      return 0;
    }
    out = new Output(parsed.format, streams);
    ctx = new CliContext(parsed, out, environment);
    const command = await COMMANDS[parsed.command]();
    return await command.run(ctx);
  } catch (err) {
    return report(out, err, ctx);
  }
}

function report(out: Output, err: unknown, ctx: CliContext | undefined): number {
  if (err instanceof UsageError) {
    out.note(`error: ${err.message}`);
    out.note(`See 'kubectl media ${err.command ? `${err.command} ` : ""}--help' for usage.`);
    return EXIT_USAGE;
  }
  const { message, hint } = explain(err, ctx);
  out.note(`error: ${message}`);
  if (hint) out.note(`hint: ${hint}`);
  return EXIT_PROBLEM;
}

function explain(err: unknown, ctx: CliContext | undefined): { message: string; hint?: string } {
  if (err instanceof CliError) return { message: err.message, ...(err.hint ? { hint: err.hint } : {}) };
  if (isProviderError(err)) {
    return {
      message: `the GPU provider call failed: ${providerProblem(err)}`,
      hint: "run 'kubectl media check-key', then 'kubectl media doctor'",
    };
  }
  const context = ctx?.inv.context ? ` (context ${ctx.inv.context})` : "";
  const k = kubeError(err);
  if (k?.code === 401) {
    return {
      message: `the Kubernetes API rejected your credentials${context} (HTTP 401)`,
      hint: "log in again or check --kubeconfig/--context",
    };
  }
  // The admission policies (docs/design.md, "Tenancy") say why in their message.
  if (k?.code === 403 && /ValidatingAdmissionPolicy/.test(k.message)) {
    return {
      message: `refused at admission${context}: ${k.message.replace(/^.*denied request: /, "")}`,
      hint: "only an operator may do this (the chart's tenancy.operatorGroups): ask one",
    };
  }
  if (k?.code === 403) {
    return {
      message: `forbidden by Kubernetes RBAC${context}: ${k.message}`,
      hint: "you need get/list on mediajobs and gpuendpoints, and patch/update on mediajobs/status, in that namespace",
    };
  }
  if (k) {
    return {
      message: `the Kubernetes API answered HTTP ${k.code}${k.reason ? ` ${k.reason}` : ""}: ${k.message}`,
      hint: "try again; if it persists, check the cluster with kubectl get mediajobs",
    };
  }
  const text = errorText(err);
  if (
    /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT|ECONNRESET|socket hang up|certificate|timeout/i.test(text)
  ) {
    return {
      message: `cannot reach the Kubernetes API server${context}: ${text}`,
      hint: "check that the cluster is up and that --kubeconfig/--context (or KUBECONFIG) point at it",
    };
  }
  return {
    message: `unexpected error: ${text}`,
    hint: "run the command again; if it fails the same way, report it with the command line you ran",
  };
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error && !err.message.includes(cause.message)
    ? `${err.message}: ${cause.message}`
    : err.message;
}
