// The command line: kubectl's global habits (--kubeconfig, --context, -n, -A, -o) plus each
// command's own flags, parsed with node:util parseArgs. Anything unknown is a usage error (exit 2).
// One piece: every command's flags in one table, so a flag means the same in each command.
import { parseArgs } from "node:util";
import { parseDuration } from "./duration.js";
import { UsageError } from "./errors.js";
import { parseFormat, type Format } from "./output.js";

export type CommandName =
  | "check-key"
  | "status"
  | "stuck"
  | "queue"
  | "reset"
  | "complete"
  | "recover"
  | "redeliver"
  | "doctor"
  | "accept"
  | "cancel"
  | "usage"
  | "storage"
  | "outputs"
  | "bind"
  | "unbind";

interface CommandSpec {
  name: CommandName;
  /** Positional arguments, all required. */
  args: string[];
  /** One more positional argument that may be left out. */
  optionalArg?: string;
  summary: string;
  details: string;
  /** Flags beyond the global ones. */
  flags: Array<"older-than" | "dry-run" | "webhooks-url" | "expires">;
  output: boolean;
  allNamespaces: boolean;
}

const JOB_COMMANDS: readonly CommandSpec[] = [
  {
    name: "check-key",
    args: [],
    summary: "check the GPU provider API key (GraphQL myself { id })",
    details:
      "Asks the GPU provider who the key belongs to. Prints valid (with the account id), invalid, or\n" +
      "account problem (the key works but billing, quota or suspension stops the account).",
    flags: [],
    output: true,
    allNamespaces: false,
  },
  {
    name: "status",
    args: [],
    optionalArg: "mediajob",
    summary: "a MediaJob as Kubernetes sees it, beside the provider's actual status; else the bindings",
    details:
      "Reads the MediaJob, asks the provider for the job's status (GET /v2/{endpoint}/status/{job}),\n" +
      "and says whether the two agree and what to do if they do not. Exit 1 when they disagree\n" +
      "(for example a missed callback) or the provider cannot be asked. Without a job: the accounts\n" +
      "each namespace is bound to (-n for one namespace; kubectl media bind).",
    flags: [],
    output: true,
    allNamespaces: false,
  },
  {
    name: "stuck",
    args: [],
    summary: "MediaJobs in Processing longer than the expected timeout",
    details:
      "Lists Processing MediaJobs past their timeout: spec.timeoutSeconds, else JOB_TIMEOUT_SECONDS\n" +
      "(default 600 s), or every Processing job older than --older-than when it is given.\n" +
      "Exit 1 when any job is stuck, 0 when none is.",
    flags: ["older-than"],
    output: true,
    allNamespaces: true,
  },
  {
    name: "queue",
    args: [],
    optionalArg: "gpuendpoint",
    summary: "per GpuEndpoint: jobs in flight, the in-flight window, jobs waiting per account",
    details:
      "For each GpuEndpoint (or the one named): the controller's in-flight window (status.window),\n" +
      "our jobs submitted and not finished, and the Pending jobs waiting for a slot (condition\n" +
      "Queued) per account (spec.account; (none) for jobs without one), with the oldest one's wait.",
    flags: [],
    output: true,
    allNamespaces: true,
  },
  {
    name: "reset",
    args: ["mediajob"],
    summary: "reset a Processing MediaJob to Pending (replay) so it is resubmitted",
    details:
      "The runbook's reset: phase Pending, updatedAt now, replay true, applied only while the job is\n" +
      "Processing (one JSON patch with test ops; docs/cli.md gives it as a kubectl patch). The\n" +
      "controller resubmits it with the same job id within one tick. Also resubmits, deliberately, a\n" +
      "job Failed with SubmissionUnconfirmed (its submission may have run once: it may run twice).\n" +
      "Refused (exit 1) otherwise.",
    flags: [],
    output: false,
    allNamespaces: false,
  },
  {
    name: "complete",
    args: ["mediajob"],
    summary: "complete a Processing MediaJob from the provider's result (missed callback)",
    details:
      "For a job the provider shows COMPLETED: takes the provider's output and marks the MediaJob\n" +
      "Completed, exactly as the callback would have. The controller then creates the next pipeline\n" +
      "step. Refused (exit 1) when the provider shows anything but COMPLETED.",
    flags: [],
    output: false,
    allNamespaces: false,
  },
  {
    name: "accept",
    args: ["mediajob"],
    summary: "vouch for a provider job adopted from a callback, so the next pipeline step runs",
    details:
      "For a job whose provider id was learnt from its callback alone (condition Submitted, reason\n" +
      "AdoptedByCallback: the submission's answer was lost): records that an operator accepts that\n" +
      "provider job as this job's (annotation media-orchestrator.io/accepted-provider-job), and the\n" +
      "controller creates the next pipeline step. Check the output first: anyone holding the job's\n" +
      "callback URL could have named another job. Refused (exit 1) for any other job.",
    flags: [],
    output: false,
    allNamespaces: false,
  },
  {
    name: "cancel",
    args: ["mediajob"],
    summary: "cancel a job for good (spec.cancel): it ends Cancelled, stopped at the provider",
    details:
      "Sets spec.cancel on the job; it cannot be undone. A waiting job ends Cancelled without being\n" +
      "submitted. A running one is cancelled at the provider and followed until the provider reports\n" +
      "it ended (its worker may run on, and be billed, meanwhile: a Warning Event with the provider's\n" +
      "job id tells when that lasts), then ends Cancelled. A job already finished is left as it is.",
    flags: [],
    output: false,
    allNamespaces: false,
  },
  {
    name: "recover",
    args: [],
    summary: "the whole 'recover a missed GPU callback' procedure over every stuck job",
    details:
      "For each stuck MediaJob, asks the provider: COMPLETED -> complete it; FAILED, TIMED_OUT or\n" +
      "CANCELLED -> apply that result as the callback would have; unknown to the provider -> reset\n" +
      "(replay); still queued or running -> leave it. Prints one line per job. --dry-run changes\n" +
      "nothing. Exit 1 when any job could not be handled.",
    flags: ["older-than", "dry-run"],
    output: true,
    allNamespaces: true,
  },
  {
    name: "redeliver",
    args: ["delivery-id"],
    summary: "ask the payment provider to redeliver a webhook delivery",
    details:
      "POST {PAYMENT_PROVIDER_API_URL}/v1/webhooks/deliveries/{id}/redeliver with the\n" +
      "PAYMENT_PROVIDER_API_KEY bearer credential. Exit 1 when the provider refuses, or when it\n" +
      "reports that our webhook endpoint rejected the redelivery.",
    flags: [],
    output: false,
    allNamespaces: false,
  },
  {
    name: "doctor",
    args: [],
    summary: "walk the runbook's diagnosis checks and print each finding with its fix",
    details:
      "In order: the GPU API key, the endpoint ids (GpuEndpoints and GPU_PROVIDER_ENDPOINT_*),\n" +
      "worker health, cold-start settings, the payment webhook secret and the webhooks sidecar\n" +
      "(its health, and a test event signed with the secret), then stuck jobs. Exit 1 when any\n" +
      "check fails; warnings and skipped checks do not.",
    flags: ["webhooks-url"],
    output: true,
    allNamespaces: true,
  },
  {
    name: "usage",
    args: [],
    optionalArg: "account",
    summary: "each account's GPU seconds this billing period, beside what was reported",
    details:
      "For each BillingAccount (or the one named: its customer id or object name), the period's\n" +
      "used seconds (billed, reported or not), the seconds the payment provider accepted, the plan's\n" +
      "limit, and the usage still waiting to be reported (seconds, attempts, the oldest). Exit 1\n" +
      "when a report was refused (it needs a person: see its UsageNotReported Event).",
    flags: [],
    output: true,
    allNamespaces: true,
  },
  {
    name: "storage",
    args: [],
    summary: "what each namespace keeps in the media bucket, and its orphans",
    details:
      "Per namespace (-n one, -A all): the objects and bytes it keeps in the media bucket and the\n" +
      "orphans (objects of jobs that are gone) the last sweep found and will delete, from the summary\n" +
      "the controller's sweep writes on each Namespace. Reads Kubernetes only: no bucket credentials.",
    flags: [],
    output: true,
    allNamespaces: true,
  },
  {
    name: "outputs",
    args: ["mediajob"],
    summary: "a completed MediaJob's outputs, with short-lived download URLs",
    details:
      "The job's status.outputs (name, size, SHA-256, key), each with a presigned GET URL valid for\n" +
      "--expires (default 15m, at most 12h), signed with the installation's store settings and keys\n" +
      "from the environment or --secret (STORAGE_BUCKET, STORAGE_ENDPOINT, STORAGE_REGION,\n" +
      "STORAGE_ADDRESSING, STORAGE_ACCESS_KEY_ID, STORAGE_SECRET_ACCESS_KEY). Without them the outputs\n" +
      "are listed without URLs. The URLs are bearer secrets until they expire: do not paste them where\n" +
      "others read. Exit 1 when the job has no outputs recorded (not Completed, or none declared).",
    flags: ["expires"],
    output: true,
    allNamespaces: false,
  },
];

const BIND_DETAILS =
  "The accounts a namespace may bill are an annotation on the Namespace (media-orchestrator.io/accounts),\n" +
  "which namespace roles cannot write and the chart's admission policy keeps to operators. A MediaJob\n" +
  "naming an account its namespace is not bound to is refused; with one account bound, jobs may leave\n" +
  "spec.account out. Idempotent; the write carries the resourceVersion read, so concurrent binds keep both.";

const BINDING_COMMANDS: readonly CommandSpec[] = [
  {
    name: "bind",
    args: ["namespace", "account"],
    summary: "let a namespace's MediaJobs bill a customer account (operators only)",
    details: BIND_DETAILS,
    flags: [],
    output: false,
    allNamespaces: false,
  },
  {
    name: "unbind",
    args: ["namespace", "account"],
    summary: "stop a namespace's new MediaJobs from billing an account (operators only)",
    details: `${BIND_DETAILS}\nJobs already submitted keep their account.`,
    flags: [],
    output: false,
    allNamespaces: false,
  },
];

const COMMANDS: readonly CommandSpec[] = [...JOB_COMMANDS, ...BINDING_COMMANDS];

const OPTIONS = {
  kubeconfig: { type: "string" },
  context: { type: "string" },
  namespace: { type: "string", short: "n" },
  "all-namespaces": { type: "boolean", short: "A" },
  output: { type: "string", short: "o" },
  secret: { type: "string" },
  "request-timeout": { type: "string" },
  "older-than": { type: "string" },
  "dry-run": { type: "boolean" },
  "webhooks-url": { type: "string" },
  expires: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

const GLOBAL_FLAGS = new Set(["kubeconfig", "context", "namespace", "secret", "request-timeout", "help"]);

const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export interface Invocation {
  command: CommandName;
  args: string[];
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  allNamespaces: boolean;
  format: Format;
  secret?: { namespace?: string; name: string };
  requestTimeoutMs: number;
  olderThanMs?: number;
  dryRun: boolean;
  webhooksUrl?: string;
  /** --expires: how long a presigned download URL lasts (outputs). */
  expiresMs?: number;
}

export type Parsed = { help: string } | Invocation;

/** Parses argv (without node and the script). Throws UsageError on anything wrong. */
export function parseCommandLine(argv: string[]): Parsed {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true, tokens: true });
  } catch (err) {
    const guess = argv.find((a) => COMMANDS.some((c) => c.name === a));
    throw new UsageError(cleanParseError(err), guess);
  }
  const { values, positionals, tokens } = parsed;
  const [name, ...args] = positionals;
  if (name === undefined || name === "help") {
    const about = args[0] === undefined ? undefined : findCommand(args[0]);
    if (name === "help" || values.help) return { help: about ? commandHelp(about) : mainHelp() };
    throw new UsageError("no command given");
  }
  const spec = findCommand(name);
  if (!spec) throw new UsageError(`unknown command "${name}"`);
  if (values.help) return { help: commandHelp(spec) };
  try {
    return invocation(spec, values, args, tokens);
  } catch (err) {
    if (err instanceof UsageError && err.command === undefined) throw new UsageError(err.message, spec.name);
    throw err;
  }
}

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>["values"];
type Tokens = ReadonlyArray<{ kind: string; name?: string; rawName?: string }>;

function invocation(spec: CommandSpec, values: Values, args: string[], tokens: Tokens): Invocation {
  for (const t of tokens) {
    if (t.kind !== "option" || t.name === undefined) continue;
    const allowed =
      GLOBAL_FLAGS.has(t.name) ||
      (spec.flags as string[]).includes(t.name) ||
      (t.name === "all-namespaces" && spec.allNamespaces) ||
      (t.name === "output" && spec.output);
    if (!allowed) throw new UsageError(`${spec.name} does not take ${t.rawName}`, spec.name);
  }
  if (args.length < spec.args.length) {
    throw new UsageError(`${spec.name} needs ${spec.args.map((a) => `<${a}>`).join(" ")}`, spec.name);
  }
  const most = spec.args.length + (spec.optionalArg === undefined ? 0 : 1);
  if (args.length > most) {
    throw new UsageError(`unexpected argument "${args[most]}"`, spec.name);
  }
  if (values["all-namespaces"] && values.namespace !== undefined) {
    throw new UsageError("use either -n/--namespace or -A/--all-namespaces, not both", spec.name);
  }
  const jobArgs = (spec.args[0] ?? spec.optionalArg) === "mediajob" ? args.map(mediaJobName) : args;
  return {
    command: spec.name,
    args: jobArgs,
    kubeconfig: values.kubeconfig,
    context: values.context,
    namespace: values.namespace,
    allNamespaces: values["all-namespaces"] ?? false,
    format: parseFormat(values.output, spec.name),
    secret: values.secret === undefined ? undefined : parseSecretRef(values.secret, spec.name),
    requestTimeoutMs:
      values["request-timeout"] === undefined
        ? DEFAULT_REQUEST_TIMEOUT_MS
        : positive(parseDuration(values["request-timeout"], "--request-timeout"), "--request-timeout"),
    olderThanMs:
      values["older-than"] === undefined ? undefined : parseDuration(values["older-than"], "--older-than"),
    dryRun: values["dry-run"] ?? false,
    webhooksUrl: values["webhooks-url"],
    ...(values.expires !== undefined && {
      expiresMs: positive(parseDuration(values.expires, "--expires"), "--expires"),
    }),
  };
}

/** ` <mediajob>`, ` [<account>]`: a command's positional arguments as its usage line shows them. */
function argsUsage(c: CommandSpec): string {
  return c.args.map((a) => ` <${a}>`).join("") + (c.optionalArg === undefined ? "" : ` [<${c.optionalArg}>]`);
}

function findCommand(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name);
}

function positive(ms: number, flag: string): number {
  if (ms <= 0) throw new UsageError(`${flag} must be greater than zero`);
  return ms;
}

/** Accepts NAME, mediajob/NAME, mediajobs/NAME or mj/NAME, as kubectl does. */
function mediaJobName(arg: string): string {
  const m = /^(?:mediajobs?|mj|mediajob\.media-orchestrator\.io)\/(.+)$/.exec(arg);
  const name = m ? m[1]! : arg;
  if (name.includes("/")) throw new UsageError(`"${arg}" is not a MediaJob name`);
  return name;
}

function parseSecretRef(value: string, command: string): { namespace?: string; name: string } {
  const parts = value.split("/");
  if (parts.length === 1 && parts[0]) return { name: parts[0] };
  if (parts.length === 2 && parts[0] && parts[1]) return { namespace: parts[0], name: parts[1] };
  throw new UsageError(`--secret takes <namespace>/<name> or <name>, not "${value}"`, command);
}

function cleanParseError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  // parseArgs suggests "--" for positionals that look like options; that never helps here.
  return message
    .replace(/\. To specify a positional argument.*$/s, "")
    .replace(/^Unknown option/, "unknown flag");
}

function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length + argsUsage(c).length));
  const lines = COMMANDS.map((c) => {
    const usage = c.name + argsUsage(c);
    return `  ${usage.padEnd(width)}   ${c.summary}`;
  });
  return `kubectl media: the media-orchestrator runbook as commands.

Usage:
  kubectl media <command> [flags]

Commands:
${lines.join("\n")}

${GLOBAL_HELP}

Run 'kubectl media <command> --help' for a command's own flags. Full guide: docs/cli.md`;
}

const GLOBAL_HELP = `Global flags:
      --kubeconfig PATH        kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)
      --context NAME           kubeconfig context to use
  -n, --namespace NS           namespace (default: the context's namespace, else "default")
      --secret [NS/]NAME       read credentials missing from the environment from this Secret
      --request-timeout D      time a provider call may take, retries included (default 30s)
  -h, --help                   help

Credentials: GPU_PROVIDER_API_KEY, PAYMENT_PROVIDER_API_KEY and PAYMENT_PROVIDER_WEBHOOK_SECRET
(and GPU_PROVIDER_API_URL, PAYMENT_PROVIDER_API_URL, ...) come from the environment, else from
the keys of the same names in the --secret Secret. Secrets are never printed.

Exit codes: 0 fine, 1 problem found (or the command could not do its job), 2 usage error.`;

function commandHelp(c: CommandSpec): string {
  const own: string[] = [];
  if (c.allNamespaces) own.push("  -A, --all-namespaces         every namespace");
  if (c.output) own.push("  -o, --output json|yaml       machine-readable output");
  if (c.flags.includes("older-than"))
    own.push(
      "      --older-than D           Processing longer than D (90s, 5m, 2h, 1d) instead of the timeout",
    );
  if (c.flags.includes("dry-run"))
    own.push("      --dry-run                say what would be done, change nothing");
  if (c.flags.includes("webhooks-url"))
    own.push("      --webhooks-url URL       the webhooks sidecar's base URL (default: $WEBHOOKS_URL)");
  const usage = `kubectl media ${c.name}${argsUsage(c)} [flags]`;
  return `${c.summary}

${c.details}

Usage:
  ${usage}
${own.length ? `\nFlags:\n${own.join("\n")}\n` : ""}
${GLOBAL_HELP}`;
}
