// What every command needs, built lazily: the kubeconfig and API door, the namespace, the
// configuration (environment first, then the operator's Secret), and the provider clients.
// Commands that do not touch Kubernetes never load the Kubernetes client.
import type { KubeConfig } from "@kubernetes/client-node";
import { ConfigError, managementUrl, parseEnv, webhookSecrets, type Env } from "../config/env.js";
import type { KubeApi } from "../k8s/api.js";
import { GpuProviderClient } from "../provider/index.js";
import type { Invocation } from "./args.js";
import { CliError } from "./errors.js";
import type { Output } from "./output.js";

/** Variables holding secrets: masked in all output, from whichever source they came. */
const SECRET_VARS = [
  "GPU_PROVIDER_API_KEY",
  "PAYMENT_PROVIDER_API_KEY",
  "PAYMENT_PROVIDER_WEBHOOK_SECRET",
  "CALLBACK_SECRET",
  "STORAGE_SECRET_ACCESS_KEY",
  "STORAGE_SESSION_TOKEN",
] as const;

/** Every variable the CLI reads, from the environment or the --secret Secret. */
const CLI_VARS = [
  ...SECRET_VARS,
  "GPU_PROVIDER_API_URL",
  "GPU_PROVIDER_MANAGEMENT_URL",
  "GPU_PROVIDER_MANAGEMENT_API",
  "GPU_PROVIDER_ENDPOINT_ASR",
  "GPU_PROVIDER_ENDPOINT_TTS",
  "GPU_PROVIDER_ENDPOINT_RENDER",
  "PAYMENT_PROVIDER_API_URL",
  "JOB_TIMEOUT_SECONDS",
  "MEDIA_ENV",
  "MEDIA_ENDPOINT_PREFIX",
  "WEBHOOK_TOLERANCE_SECONDS",
  "WEBHOOKS_URL",
  // The store, for the download URLs of `outputs` (the dev stack's .local/env exports them).
  "STORAGE_BUCKET",
  "STORAGE_ENDPOINT",
  "STORAGE_REGION",
  "STORAGE_ADDRESSING",
  "STORAGE_CREDENTIALS",
  "STORAGE_ACCESS_KEY_ID",
] as const;

const PLAIN_VARS: ReadonlySet<string> = new Set(
  CLI_VARS.filter((n) => !(SECRET_VARS as readonly string[]).includes(n)),
);

export interface CliConfig {
  env: Env;
  /** The webhooks sidecar's base URL: --webhooks-url, else WEBHOOKS_URL. */
  webhooksUrl?: string;
  /** Where each variable that is set came from. */
  sources: Partial<Record<(typeof CLI_VARS)[number], "environment" | "secret">>;
  webhookSecrets: string[];
}

export interface Kube {
  kc: KubeConfig;
  api: KubeApi;
  /** The server URL, for messages. */
  server: string;
}

/** Whether the kubeconfig (without a context override) names this context; false if it does not load. */
function hasContext(load: () => KubeConfig, context: string): boolean {
  try {
    return load().getContextObject(context) !== null;
  } catch {
    return true; // the file itself is the problem: report that instead
  }
}

export class CliContext {
  #kube?: Promise<Kube>;
  #config?: Promise<CliConfig>;

  constructor(
    readonly inv: Invocation,
    readonly out: Output,
    readonly environment: NodeJS.ProcessEnv,
  ) {
    for (const name of SECRET_VARS) out.addSecrets(environment[name]);
    for (const s of (environment.PAYMENT_PROVIDER_WEBHOOK_SECRET ?? "").split(",")) out.addSecrets(s.trim());
  }

  kube(): Promise<Kube> {
    this.#kube ??= this.#loadKube();
    return this.#kube;
  }

  async #loadKube(): Promise<Kube> {
    const [{ loadKubeConfig }, { KubeApi }] = await Promise.all([
      import("../k8s/config.js"),
      import("../k8s/api.js"),
    ]);
    let kc: KubeConfig;
    try {
      kc = loadKubeConfig({ path: this.inv.kubeconfig, context: this.inv.context });
    } catch (err) {
      if (
        this.inv.context &&
        !hasContext(() => loadKubeConfig({ path: this.inv.kubeconfig }), this.inv.context)
      ) {
        throw new CliError(
          `context "${this.inv.context}" is not in the kubeconfig`,
          "list the contexts with: kubectl config get-contexts",
        );
      }
      throw new CliError(
        `cannot load the kubeconfig: ${err instanceof Error ? err.message : String(err)}`,
        "pass --kubeconfig PATH (or set KUBECONFIG) and, if needed, --context NAME",
      );
    }
    const user = kc.getCurrentUser();
    this.out.addSecrets(user?.token, user?.password);
    return { kc, api: new KubeApi(kc), server: kc.getCurrentCluster()?.server ?? "(unknown)" };
  }

  /** -n, else the kubeconfig context's namespace, else "default". */
  async namespace(): Promise<string> {
    if (this.inv.namespace) return this.inv.namespace;
    const { kc } = await this.kube();
    return kc.getContextObject(kc.getCurrentContext())?.namespace || "default";
  }

  /** The namespace to list in: undefined with -A (all namespaces). */
  async listNamespace(): Promise<string | undefined> {
    return this.inv.allNamespaces ? undefined : this.namespace();
  }

  config(): Promise<CliConfig> {
    this.#config ??= this.#loadConfig();
    return this.#config;
  }

  async #loadConfig(): Promise<CliConfig> {
    const merged: Record<string, string | undefined> = {};
    const sources: CliConfig["sources"] = {};
    for (const name of CLI_VARS) {
      const v = this.environment[name];
      if (v !== undefined && v.trim() !== "") {
        merged[name] = v;
        sources[name] = "environment";
      }
    }
    if (this.inv.secret) {
      const fromSecret = await this.#readSecret();
      for (const name of CLI_VARS) {
        const v = fromSecret[name];
        if (merged[name] === undefined && v !== undefined && v.trim() !== "") {
          merged[name] = v;
          sources[name] = "secret";
        }
      }
    }
    let env: Env;
    try {
      env = parseEnv(merged);
    } catch (err) {
      if (err instanceof ConfigError) {
        throw new CliError(
          err.message,
          "fix the variable in your environment (or in the --secret Secret) and run the command again",
        );
      }
      throw err;
    }
    const secrets = webhookSecrets(env);
    this.out.addSecrets(env.GPU_PROVIDER_API_KEY, env.PAYMENT_PROVIDER_API_KEY, env.CALLBACK_SECRET);
    this.out.addSecrets(env.STORAGE_SECRET_ACCESS_KEY, env.STORAGE_SESSION_TOKEN);
    this.out.addSecrets(env.PAYMENT_PROVIDER_WEBHOOK_SECRET, ...secrets);
    const webhooksUrl = (this.inv.webhooksUrl ?? merged.WEBHOOKS_URL)?.replace(/\/+$/, "");
    return { env, sources, webhookSecrets: secrets, ...(webhooksUrl ? { webhooksUrl } : {}) };
  }

  async #readSecret(): Promise<Record<string, string>> {
    const ref = this.inv.secret!;
    const { api } = await this.kube();
    const namespace = ref.namespace ?? (await this.namespace());
    const { kubeError } = await import("../k8s/errors.js");
    let secret;
    try {
      secret = await (await api.typed()).core.readNamespacedSecret({ name: ref.name, namespace });
    } catch (err) {
      const code = kubeError(err)?.code;
      if (code === 404) {
        throw new CliError(
          `Secret ${namespace}/${ref.name} not found`,
          `check --secret: kubectl get secrets -n ${namespace}`,
        );
      }
      if (code === 403) {
        throw new CliError(
          `not allowed to read Secret ${namespace}/${ref.name}`,
          "ask for 'get secrets' in that namespace, or export the variables in your shell instead of --secret",
        );
      }
      throw err;
    }
    const values: Record<string, string> = {};
    for (const [k, v] of Object.entries(secret.data ?? {})) {
      const text = Buffer.from(v, "base64").toString("utf8");
      values[k] = text;
      // Every value of the Secret is masked except the plain settings the CLI reads (URLs, names).
      if (!PLAIN_VARS.has(k)) {
        this.out.addSecrets(text, v);
        for (const part of text.split(",")) this.out.addSecrets(part.trim());
      }
    }
    return values;
  }

  /** The GPU provider client; fails with what to do when no key is configured. */
  async gpu(): Promise<GpuProviderClient> {
    const { env } = await this.config();
    if (!env.GPU_PROVIDER_API_KEY) {
      throw new CliError(
        "no GPU provider API key: GPU_PROVIDER_API_KEY is not set",
        "export GPU_PROVIDER_API_KEY, or pass --secret <namespace>/<name> naming the operator's Secret",
      );
    }
    const budget = this.inv.requestTimeoutMs;
    return new GpuProviderClient({
      apiUrl: env.GPU_PROVIDER_API_URL,
      managementUrl: managementUrl(env),
      managementApi: env.GPU_PROVIDER_MANAGEMENT_API,
      apiKey: env.GPU_PROVIDER_API_KEY,
      timeoutMs: Math.min(10_000, budget),
      retryBudgetMs: budget,
    });
  }
}
