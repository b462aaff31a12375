// bind / unbind NAMESPACE ACCOUNT: which customer accounts a namespace's MediaJobs may bill
// (docs/design.md, "Tenancy"). The binding is an annotation on the Namespace, which namespace
// roles cannot write; the chart's operator-only policy refuses it to anyone but an operator. The
// write carries the resourceVersion read, so two operators binding at once never lose one.
import type { KubeApi, KubeObject } from "../k8s/api.js";
import { API_VERSION } from "../crds/common.js";
import { isConflict, kubeError } from "../k8s/errors.js";
import { ACCOUNT_ID, ACCOUNTS_ANNOTATION, accountsAnnotation, boundAccounts } from "../mediajob/tenancy.js";
import type { CliContext } from "./context.js";
import { CliError, EXIT_OK, UsageError } from "./errors.js";

export async function run(ctx: CliContext): Promise<number> {
  const [namespace, account] = ctx.inv.args as [string, string];
  const unbind = ctx.inv.command === "unbind";
  if (!ACCOUNT_ID.test(account))
    throw new UsageError(
      `"${account}" is not an account id: letters, digits, '_', '.', ':' or '-', at most 255`,
      ctx.inv.command,
    );
  const { api } = await ctx.kube();
  const { before, after } = await changeBinding(api, namespace, account, unbind ? "unbind" : "bind");
  if (after.join() === before.join()) {
    ctx.out.line(
      `namespace/${namespace} ${unbind ? "is not bound to" : "is bound to"} ${account} already: ` +
        `bound to ${before.join(", ") || "no account"}`,
    );
    return EXIT_OK;
  }
  ctx.out.line(
    `namespace/${namespace} ${unbind ? "unbound from" : "bound to"} ${account}: ` +
      `its MediaJobs may bill ${after.join(", ") || "no account"}`,
  );
  if (!unbind && after.length > 1)
    ctx.out.line(
      "Jobs in it name their account in spec.account (with one account bound they may leave it out).",
    );
  return EXIT_OK;
}

/** Adds or removes one account of a namespace's binding; a conflict is read again and retried. */
export async function changeBinding(
  api: KubeApi,
  namespace: string,
  account: string,
  change: "bind" | "unbind",
): Promise<{ before: string[]; after: string[] }> {
  for (let attempt = 1; ; attempt++) {
    const ns = await api.get<KubeObject>("namespaces", "", namespace);
    if (!ns) throw new CliError(`namespace ${namespace} does not exist`, "kubectl get namespaces");
    const before = boundAccounts(ns.metadata.annotations as Record<string, string> | undefined);
    const after =
      change === "unbind"
        ? before.filter((a) => a !== account)
        : before.includes(account)
          ? before
          : [...before, account];
    if (after.join() === before.join()) return { before, after };
    try {
      await api.mergePatch("namespaces", "", namespace, {
        metadata: {
          resourceVersion: ns.metadata.resourceVersion,
          annotations: { [ACCOUNTS_ANNOTATION]: accountsAnnotation(after) ?? null },
        },
      });
      if (change === "bind") await admittedAfterBinding(api, namespace, account);
      return { before, after };
    } catch (err) {
      if (!isConflict(err) || attempt >= 5) throw err;
    }
  }
}

/**
 * The admission policy reads Namespaces from the apiserver's cache, a moment behind the write: a
 * bind returns once a MediaJob naming the account would be admitted there (a server-side dry run,
 * nothing stored), so a job created right after is not refused. Bounded: the binding is written
 * either way, and a cluster without the policy admits at once.
 */
async function admittedAfterBinding(api: KubeApi, namespace: string, account: string): Promise<void> {
  const probe = {
    apiVersion: API_VERSION,
    kind: "MediaJob",
    metadata: { generateName: "bind-probe-" },
    spec: { workload: "asr", account },
  };
  const path = `${api.objectPath("mediajobs", namespace)}?dryRun=All`;
  for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
    try {
      await api.rawJson("POST", path, probe);
      return;
    } catch (err) {
      const k = kubeError(err);
      // Refused for another reason (no right to create jobs, a webhook): nothing to wait for.
      if (k?.code !== 403 || !/is not bound to account/.test(k.message)) return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Each namespace's bound accounts (`kubectl media status` without a job). */
export async function listBindings(
  api: KubeApi,
  only?: string,
): Promise<Array<{ namespace: string; accounts: string[] }>> {
  const all = only
    ? [await api.get<KubeObject>("namespaces", "", only)].filter((n) => n !== undefined)
    : (await api.list<KubeObject>("namespaces")).items;
  return all
    .map((n) => ({
      namespace: n.metadata.name,
      accounts: boundAccounts(n.metadata.annotations as Record<string, string> | undefined),
    }))
    .filter((b) => b.accounts.length > 0 || only !== undefined);
}
