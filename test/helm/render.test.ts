// The Helm chart, offline: `helm lint` and `helm template` for every values file, with the real
// helm (built from its Go module by test/support/helm.ts). Renders are parsed and checked for
// what users rely on: the objects of each environment, the pod's security and probes, the
// configuration the product actually reads, RBAC exactly as documented, secrets, and clear
// failures on bad values.
import { beforeAll, describe, expect, it } from "vitest";
import { EnvSchema, fairShareWeights, parseEnv } from "../../src/config/env.js";
import { accountBindingPolicy, operatorOnlyPolicy } from "../../src/crds/admission-policy.js";
import { allRulesPolicies } from "../../src/crds/index.js";
import {
  CHART_DIR,
  EXPECTED_RULES,
  expectedLeaseRules,
  helm,
  helmBinary,
  helmTemplate as helmTemplateDocs,
  leaseName,
  valuesFile,
  type Manifest,
} from "../support/helm.js";

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}
interface Probe {
  httpGet: { path: string; port: string };
}
interface Container {
  name: string;
  image: string;
  args: string[];
  env: EnvVar[];
  ports: Array<{ name: string; containerPort: number }>;
  livenessProbe: Probe;
  readinessProbe: Probe;
  startupProbe: Probe;
  resources: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext: Record<string, unknown>;
}
interface PodSpec {
  serviceAccountName: string;
  securityContext: Record<string, unknown>;
  containers: Container[];
  affinity?: unknown;
}
type Deployment = Manifest & {
  spec: { replicas: number; template: { metadata: { annotations?: Record<string, string> }; spec: PodSpec } };
};
type Role = Manifest & { rules: Array<Record<string, unknown>> };
interface SecretProjection {
  name: string;
  optional?: boolean;
  items: Array<{ key: string; path: string }>;
}
interface Volume {
  name: string;
  projected?: { defaultMode: number; sources: Array<{ secret: SecretProjection }> };
}
type PodSpecWithVolumes = Omit<PodSpec, "containers"> & {
  volumes: Volume[];
  containers: Array<
    Container & { volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }> }
  >;
};
type Binding = Manifest & {
  roleRef: { kind: string; name: string };
  subjects: Array<{ kind: string; name: string; namespace: string }>;
};

/**
 * The chart's objects, a List's items among them: the callback-secret hook is one List (its Job,
 * ServiceAccount, Role, RoleBinding and NetworkPolicy, deleted together by its policy).
 */
const helmTemplate = (release: string, namespace: string, args: string[] = []): Manifest[] =>
  helmTemplateDocs(release, namespace, args).flatMap((o) =>
    o.kind === "List" ? ((o as { items?: Manifest[] }).items ?? []) : [o],
  );

const G = "media-orchestrator.io";
/** With webhooks.separateDeployment: the controller's ServiceAccount's rules, and the sidecar's. */
const CONTROLLER_RULES = [
  { apiGroups: [G], resources: ["mediajobs"], verbs: ["get", "list", "watch", "create", "patch"] },
  { apiGroups: [G], resources: ["mediajobs/status"], verbs: ["update"] },
  { apiGroups: [G], resources: ["gpuendpoints"], verbs: ["list", "watch"] },
  { apiGroups: [G], resources: ["gpuendpoints/status"], verbs: ["update"] },
  // The usage reporter reads an account and writes its period usage; the plan's limit is shown there.
  { apiGroups: [G], resources: ["billingaccounts"], verbs: ["get", "list", "watch"] },
  { apiGroups: [G], resources: ["billingaccounts/status"], verbs: ["update"] },
  { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
];
const WEBHOOKS_RULES = [
  // A callback reads its job; before adopting a provider job it lists the jobs that hold it.
  { apiGroups: [G], resources: ["mediajobs"], verbs: ["get", "list"] },
  { apiGroups: [G], resources: ["mediajobs/status"], verbs: ["update"] },
  { apiGroups: [G], resources: ["billingaccounts"], verbs: ["get", "create"] },
  { apiGroups: [G], resources: ["billingaccounts/status"], verbs: ["update"] },
  { apiGroups: [G], resources: ["paymentevents"], verbs: ["get", "list", "watch", "create", "delete"] },
  { apiGroups: [G], resources: ["paymentevents/status"], verbs: ["update"] },
  // A result adopted by a callback without a recorded /run answer is a Warning Event on its job.
  { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
];

const ENVIRONMENTS = ["dev", "staging", "prod"] as const;

/** The chart's one Secret, decoded. */
const secretOf = (objs: Manifest[]) => {
  const s = one<Manifest & { data: Record<string, string> | null }>(objs, "Secret");
  return Object.fromEntries(
    Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString()]),
  );
};
const WORKLOADS = ["asr", "tts", "render"] as const;

const find = <T extends Manifest>(objs: Manifest[], kind: string, name?: string): T[] =>
  objs.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name)) as T[];
const one = <T extends Manifest>(objs: Manifest[], kind: string, name?: string): T => {
  const found = find<T>(objs, kind, name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name ?? ""}, found ${found.length}`);
  return found[0]!;
};
const kinds = (objs: Manifest[]) => objs.map((o) => o.kind).sort();
const envOf = (c: Container) => new Map(c.env.map((e) => [e.name, e]));
const literalEnv = (c: Container): Record<string, string> =>
  Object.fromEntries(c.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));

const DIGEST = `sha256:${"4f".repeat(32)}`;
const RUNBOOKS = "https://git.example.com/platform/media-orchestrator/blob/main/docs/observability.md";
/** The ingress controller's pod CIDR and the API server's endpoint, as docs/helm.md's examples give them. */
const INGRESS_PODS = "10.244.0.0/16";
const API_SERVER = "172.18.0.2/32";

/**
 * What docs/helm.md adds to the values file of an environment: outside dev, the HTTPS host and
 * the ingress controller's addresses; in prod also the image digest and the API server's address.
 */
const hostArgs = (env: string) => [
  ...(env === "dev"
    ? []
    : [
        "--set",
        `ingress.host=media-hooks-${env}.example.com`,
        "--set",
        `webhooks.trustedProxies={${INGRESS_PODS}}`,
      ]),
  ...(env === "prod"
    ? ["--set", `image.digest=${DIGEST}`, "--set", `networkPolicy.egress.apiServer.cidrs={${API_SERVER}}`]
    : []),
];

/** Renders an environment the way docs/helm.md installs it. */
const renderEnv = (env: string, args: string[] = []) =>
  helmTemplate(`mo-${env}`, `media-${env}`, [
    "-f",
    valuesFile(`values-${env}.yaml`),
    ...hostArgs(env),
    ...args,
  ]);

beforeAll(() => {
  helmBinary();
}, 15 * 60_000);

describe("helm lint", () => {
  it.each([
    ["values.yaml", []],
    ["values-dev.yaml", []],
    ["values-staging.yaml", hostArgs("staging")],
    ["values-prod.yaml", hostArgs("prod")],
  ])("passes --strict with %s and the settings docs/helm.md gives it", (file, args) => {
    const res = helm(["lint", CHART_DIR, "--strict", "-f", valuesFile(file), ...args]);
    expect(res.stdout + res.stderr).toContain("1 chart(s) linted, 0 chart(s) failed");
    // helm lint reports a template's `fail` as an [INFO] line and still passes: none may occur.
    const findings = (res.stdout + res.stderr).split("\n").filter((l) => /\[(INFO|WARNING|ERROR)\]/.test(l));
    expect(findings).toEqual(["[INFO] Chart.yaml: icon is recommended"]);
    expect(res.status).toBe(0);
  });

  it("refuses what install refuses: prod without its host, trusted proxies, digest and API server address", () => {
    const res = helm(["lint", CHART_DIR, "--strict", "-f", valuesFile("values-prod.yaml")]);
    expect(res.status).not.toBe(0);
    const out = res.stdout + res.stderr;
    for (const value of [
      "/ingress/host",
      "/webhooks/trustedProxies",
      "/image/digest",
      "/networkPolicy/egress/apiServer/cidrs",
    ])
      expect(out).toContain(`at '${value}'`);
    // Each one alone, as install would refuse it.
    const full = hostArgs("prod");
    for (let i = 0; i < full.length; i += 2) {
      const without = [...full.slice(0, i), ...full.slice(i + 2)];
      const one = helm(["lint", CHART_DIR, "--strict", "-f", valuesFile("values-prod.yaml"), ...without]);
      expect(one.status, full[i + 1]).not.toBe(0);
      const install = helm(["template", "mo", CHART_DIR, "-f", valuesFile("values-prod.yaml"), ...without]);
      expect(install.status, full[i + 1]).not.toBe(0);
    }
  });

  it("passes for the CRD release", () => {
    const res = helm(["lint", CHART_DIR, "--strict", "--set", "crds.only=true"]);
    expect(res.status, res.stdout + res.stderr).toBe(0);
  });
});

describe.each(ENVIRONMENTS)("helm template, %s environment", (env) => {
  let objs: Manifest[];
  let deployment: Deployment;
  const ns = `media-${env}`;
  const replicas = env === "dev" ? 1 : 2;

  beforeAll(() => {
    objs = renderEnv(env);
    deployment = one<Deployment>(objs, "Deployment");
  });

  it("renders the operator's objects and no CRDs (those belong to the CRD release)", () => {
    const expected = [
      "Deployment",
      "GpuEndpoint",
      "GpuEndpoint",
      "GpuEndpoint",
      "Role",
      "Role",
      "RoleBinding",
      "RoleBinding",
      "Secret",
      "Service",
      "ServiceAccount",
      // The hook that creates the callback Secret once, and the `helm test` pod.
      "Job",
      "Role",
      "RoleBinding",
      "ServiceAccount",
      "Pod",
      ...(replicas > 1 ? ["PodDisruptionBudget"] : []),
      ...(env === "dev" ? [] : ["Ingress"]),
      // The operator's pod's, the test pod's and the hook's.
      ...(env === "prod" ? ["NetworkPolicy", "NetworkPolicy", "NetworkPolicy"] : []),
      // Cluster-scoped: the read of the watched Namespace's bindings, the operator-only policy.
      "ClusterRole",
      "ClusterRoleBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
    ].sort();
    expect(kinds(objs)).toEqual(expected);
    const clusterScoped = new Set([
      "ClusterRole",
      "ClusterRoleBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
    ]);
    for (const o of objs) {
      if (o.kind !== "GpuEndpoint" && !clusterScoped.has(o.kind))
        expect(o.metadata.namespace, `${o.kind} namespace`).toBe(ns);
      expect(o.metadata.labels).toMatchObject({
        "app.kubernetes.io/instance": `mo-${env}`,
        "app.kubernetes.io/managed-by": "Helm",
      });
    }
  });

  it("renders the three GpuEndpoints named <prefix>-<workload>-<env>, in the watched namespace", () => {
    const eps = find<Manifest & { spec: Record<string, unknown> }>(objs, "GpuEndpoint");
    expect(eps.map((e) => e.metadata.name).sort()).toEqual(WORKLOADS.map((w) => `media-${w}-${env}`).sort());
    for (const ep of eps) {
      expect(ep.apiVersion).toBe("media-orchestrator.io/v1alpha1");
      expect(ep.metadata.namespace).toBe(ns);
      expect(ep.metadata.name).toBe(`media-${ep.spec.workload as string}-${env}`);
      expect(ep.spec.maxWorkers as number).toBeGreaterThanOrEqual(ep.spec.minWorkers as number);
      // The advice against cold starts (docs/design.md, Operational procedures): prod keeps one warm
      // worker per endpoint; the others scale to zero.
      expect(ep.spec.minWorkers).toBe(env === "prod" ? 1 : 0);
    }
    const renamed = renderEnv(env, ["--set", "endpointPrefix=acme"]);
    expect(
      find(renamed, "GpuEndpoint")
        .map((e) => e.metadata.name)
        .sort(),
    ).toEqual(WORKLOADS.map((w) => `acme-${w}-${env}`).sort());
  });

  it("runs the controller and the webhooks sidecar as two containers of one image", () => {
    expect(deployment.spec.replicas).toBe(replicas);
    const pod = deployment.spec.template.spec;
    expect(pod.serviceAccountName).toBe(`mo-${env}-media-orchestrator`);
    expect(pod.containers.map((c) => [c.name, c.args])).toEqual([
      ["controller", ["controller"]],
      ["webhooks", ["webhooks"]],
    ]);
    // prod runs its image by digest (required there).
    expect(new Set(pod.containers.map((c) => c.image))).toEqual(
      new Set([env === "prod" ? `media-orchestrator:0.1.0@${DIGEST}` : "media-orchestrator:0.1.0"]),
    );
    if (replicas > 1) {
      const pdb = one<Manifest & { spec: Record<string, unknown> }>(objs, "PodDisruptionBudget");
      expect(pdb.spec).toMatchObject({ minAvailable: 1 });
      expect(pod.affinity).toBeDefined(); // spread over nodes
    }
  });

  it("runs restricted: non-root, read-only root file system, no escalation, no capabilities", () => {
    const pod = deployment.spec.template.spec;
    // No fixed uid: the image's numeric USER satisfies runAsNonRoot, and a platform may assign one.
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
    for (const c of pod.containers) {
      expect(c.securityContext, c.name).toEqual({
        allowPrivilegeEscalation: false,
        privileged: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ["ALL"] },
      });
      expect(c.resources.requests?.cpu, c.name).toBeTruthy();
      expect(c.resources.requests?.memory, c.name).toBeTruthy();
      expect(c.resources.limits?.memory, c.name).toBeTruthy();
    }
  });

  it("probes the sidecar's and the controller's health routes on their own ports", () => {
    const [controller, webhooks] = deployment.spec.template.spec.containers;
    expect(webhooks!.ports).toEqual([expect.objectContaining({ name: "webhooks", containerPort: 8080 })]);
    expect(webhooks!.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "webhooks" });
    expect(webhooks!.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "webhooks" });
    expect(controller!.ports).toEqual([expect.objectContaining({ name: "metrics", containerPort: 8081 })]);
    expect(controller!.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "metrics" });
    expect(controller!.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "metrics" });
    const svc = one<Manifest & { spec: { ports: Array<Record<string, unknown>> } }>(objs, "Service");
    expect(svc.spec.ports.map((p) => [p.name, p.port, p.targetPort])).toEqual([
      ["webhooks", 8080, "webhooks"],
      ["metrics", 8081, "metrics"],
    ]);
  });

  it("configures only variables the product reads, and the product accepts them", () => {
    // POD_NAMESPACE is read by the sidecar directly (src/webhooks/server.ts webhookNamespace),
    // NODE_OPTIONS by Node (the sidecar's heap bound, the next tests).
    const known = new Set([...Object.keys(EnvSchema.shape), "POD_NAMESPACE", "NODE_OPTIONS"]);
    expect(known.has("SECRETS_DIR")).toBe(true);
    for (const c of deployment.spec.template.spec.containers) {
      for (const e of c.env)
        expect(known.has(e.name), `${c.name}: ${e.name} is not read by the product`).toBe(true);
      const vars = envOf(c);
      expect(vars.get("WATCH_NAMESPACE")?.value).toBe(ns);
      expect(vars.get("LEADER_ELECTION")?.value).toBe("true");
      expect(vars.get("LEADER_ELECTION_NAMESPACE")?.value).toBe(ns);
      expect(vars.get("LEADER_ELECTION_ID")?.value).toBe(leaseName(ns));
      expect(vars.get("MEDIA_ENV")?.value).toBe(env);
      expect(vars.get("POD_NAME")?.valueFrom?.fieldRef?.fieldPath).toBe("metadata.name");
      expect(vars.get("POD_NAMESPACE")?.valueFrom?.fieldRef?.fieldPath).toBe("metadata.namespace");
      // No credential in the environment: they are files (the next test).
      expect(c.env.filter((e) => e.valueFrom?.secretKeyRef)).toEqual([]);
      expect(vars.get("SECRETS_DIR")?.value).toBe("/var/run/secrets/media-orchestrator");
      // What the pod would see, with the secrets filled in, passes the product's own parser.
      const parsed = parseEnv({
        ...literalEnv(c),
        GPU_PROVIDER_API_KEY: "k",
        CALLBACK_SECRET: "s",
        POD_NAME: "pod-0",
      });
      expect(parsed).toMatchObject({
        MEDIA_ENV: env,
        WATCH_NAMESPACE: ns,
        LEADER_ELECTION: true,
        CALLBACK_BASE_URL:
          env === "dev"
            ? `http://mo-${env}-media-orchestrator.${ns}.svc:8080`
            : `https://media-hooks-${env}.example.com`,
        LEADER_ELECTION_LEASE_DURATION_SECONDS: 15,
        LEADER_ELECTION_RENEW_DEADLINE_SECONDS: 10,
        LEADER_ELECTION_RETRY_PERIOD_SECONDS: 2,
        UNCONFIRMED_SUBMISSION_POLICY: "fail",
      });
    }
  });

  it("gives each container only the secrets it uses, as files of its own volume (never variables)", () => {
    const pod = deployment.spec.template.spec as PodSpecWithVolumes;
    const secret = `mo-${env}-media-orchestrator`;
    const callback = `mo-${env}-media-orchestrator-callback`;
    const seen = (name: string) => {
      const c = pod.containers.find((x) => x.name === name)!;
      const mount = c.volumeMounts.find((m) => m.mountPath === "/var/run/secrets/media-orchestrator")!;
      expect(mount.readOnly, name).toBe(true);
      const volume = pod.volumes.find((v) => v.name === mount.name)!;
      expect(volume.projected!.defaultMode).toBe(0o444);
      return volume.projected!.sources.map((s) => [
        s.secret.name,
        s.secret.optional ?? false,
        s.secret.items,
      ]);
    };
    // The controller: the GPU key (submissions) and the callback key (it mints the callback URLs).
    // Never the payment signing secret nor the payment API key.
    expect(seen("controller")).toEqual([
      [secret, true, [{ key: "GPU_PROVIDER_API_KEY", path: "GPU_PROVIDER_API_KEY" }]],
      [callback, false, [{ key: "CALLBACK_SECRET", path: "CALLBACK_SECRET" }]],
      // The key before a rotation, while one is kept: URLs minted with it stay good.
      [callback, true, [{ key: "CALLBACK_SECRET_PREVIOUS", path: "CALLBACK_SECRET_PREVIOUS" }]],
    ]);
    // The sidecar: the payment secrets, the callback key, and a GPU key only to confirm callbacks.
    expect(seen("webhooks")).toEqual([
      [
        secret,
        true,
        [
          { key: "GPU_PROVIDER_API_KEY", path: "GPU_PROVIDER_API_KEY" },
          { key: "PAYMENT_PROVIDER_API_KEY", path: "PAYMENT_PROVIDER_API_KEY" },
          { key: "PAYMENT_PROVIDER_WEBHOOK_SECRET", path: "PAYMENT_PROVIDER_WEBHOOK_SECRET" },
        ],
      ],
      [callback, false, [{ key: "CALLBACK_SECRET", path: "CALLBACK_SECRET" }]],
      [callback, true, [{ key: "CALLBACK_SECRET_PREVIOUS", path: "CALLBACK_SECRET_PREVIOUS" }]],
    ]);
    // Every file is named after a variable the product reads from SECRETS_DIR.
    for (const v of pod.volumes.filter((x) => x.projected))
      for (const src of v.projected!.sources)
        for (const item of src.secret.items) expect(Object.keys(EnvSchema.shape)).toContain(item.path);
  });

  it("grants exactly the documented RBAC, in the release namespace only", () => {
    const fullname = `mo-${env}-media-orchestrator`;
    // Cluster-wide, only the read of the watched Namespace (its account bindings).
    expect(find<Role>(objs, "ClusterRole").map((r) => [r.metadata.name, r.rules])).toEqual([
      [
        `${ns}-${fullname}-namespaces`,
        [
          {
            apiGroups: [""],
            resources: ["namespaces"],
            verbs: ["get", "list", "watch", "patch"],
            resourceNames: [ns],
          },
        ],
      ],
    ]);
    expect(find<Binding>(objs, "ClusterRoleBinding").map((b) => b.subjects)).toEqual([
      [{ kind: "ServiceAccount", name: fullname, namespace: ns }],
    ]);
    expect(one<Role>(objs, "Role", fullname).rules).toEqual(EXPECTED_RULES);
    expect(one<Role>(objs, "Role", `${fullname}-leader-election`).rules).toEqual(
      expectedLeaseRules(leaseName(ns)),
    );
    for (const name of [fullname, `${fullname}-leader-election`]) {
      const binding = one<Binding>(objs, "RoleBinding", name);
      expect(binding.roleRef).toMatchObject({ kind: "Role", name });
      expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: fullname, namespace: ns }]);
    }
  });
});

describe("helm template, options", () => {
  it("watchAllNamespaces: a ClusterRole with the same rules, named after the namespace too", () => {
    const objs = helmTemplate("mo", "media-all", [
      "--set",
      "watchAllNamespaces=true",
      "--set",
      "gpuEndpoints.enabled=true",
    ]);
    const role = one<Role>(objs, "ClusterRole", "media-all-mo-media-orchestrator");
    expect(role.rules).toEqual(EXPECTED_RULES);
    const binding = one<Binding>(objs, "ClusterRoleBinding", role.metadata.name);
    expect(binding.roleRef).toMatchObject({ kind: "ClusterRole", name: role.metadata.name });
    expect(binding.subjects).toEqual([
      { kind: "ServiceAccount", name: "mo-media-orchestrator", namespace: "media-all" },
    ]);
    // The cluster's one Lease, in a namespace every watch-all release shares.
    expect(
      find<Role>(objs, "Role", "mo-media-orchestrator-leader-election").map((r) => [
        r.metadata.namespace,
        r.rules,
      ]),
    ).toEqual([["kube-system", expectedLeaseRules("media-orchestrator-cluster")]]);
    const controller = one<Deployment>(objs, "Deployment").spec.template.spec.containers[0]!;
    expect(envOf(controller).get("WATCH_NAMESPACE")?.value).toBe("");
    expect(find(objs, "GpuEndpoint").map((e) => e.metadata.namespace)).toEqual([
      "media-all",
      "media-all",
      "media-all",
    ]);
  });

  it("watchNamespace: the Role, the GpuEndpoints and the Lease go to that namespace", () => {
    const objs = helmTemplate("mo", "media-ops", [
      "--set",
      "watchNamespace=media-jobs",
      "--set",
      "gpuEndpoints.enabled=true",
    ]);
    expect(one<Role>(objs, "Role", "mo-media-orchestrator").metadata.namespace).toBe("media-jobs");
    expect(one<Binding>(objs, "RoleBinding", "mo-media-orchestrator").metadata.namespace).toBe("media-jobs");
    expect(one<Role>(objs, "Role", "mo-media-orchestrator-leader-election").metadata.namespace).toBe(
      "media-jobs",
    );
    expect(new Set(find(objs, "GpuEndpoint").map((e) => e.metadata.namespace))).toEqual(
      new Set(["media-jobs"]),
    );
    const env = envOf(one<Deployment>(objs, "Deployment").spec.template.spec.containers[0]!);
    expect(env.get("WATCH_NAMESPACE")?.value).toBe("media-jobs");
    expect(env.get("LEADER_ELECTION_NAMESPACE")?.value).toBe("media-jobs");
    expect(env.get("LEADER_ELECTION_ID")?.value).toBe(leaseName("media-jobs"));
  });

  it("the CRD release renders the four CRDs, their rules and the account-binding policy only, the CRDs kept on uninstall", () => {
    const all = helmTemplate("media-orchestrator-crds", "media-system", ["--set", "crds.only=true"]);
    expect(kinds(all.filter((o) => o.kind !== "CustomResourceDefinition"))).toEqual([
      "ClusterRole",
      "ClusterRole",
      "ClusterRole",
      ...Array<string>(7).fill("ValidatingAdmissionPolicy"),
      ...Array<string>(7).fill("ValidatingAdmissionPolicyBinding"),
    ]);
    // Each resource's rules as src/crds/rules-policy.ts writes them.
    const rules = allRulesPolicies() as Manifest[];
    for (const expected of rules) {
      const { labels: _labels, ...metadata } = one(all, expected.kind, expected.metadata.name).metadata;
      expect({ ...one(all, expected.kind, expected.metadata.name), metadata }).toEqual(expected);
    }
    expect(rules.map((r) => r.metadata.name)).toContain("media-orchestrator-mediajob-rules");
    const objs = find(all, "CustomResourceDefinition");
    expect(objs.map((o) => o.metadata.name).sort()).toEqual(
      ["billingaccounts", "gpuendpoints", "mediajobs", "paymentevents"].map(
        (p) => `${p}.media-orchestrator.io`,
      ),
    );
    for (const crd of objs) {
      expect(crd.kind).toBe("CustomResourceDefinition");
      expect(crd.metadata.annotations).toEqual({ "helm.sh/resource-policy": "keep" });
      expect(crd.metadata.labels?.["app.kubernetes.io/instance"]).toBe("media-orchestrator-crds");
    }
    const unkept = helmTemplate("crds", "media-system", [
      "--set",
      "crds.only=true",
      "--set",
      "crds.keep=false",
    ]);
    for (const crd of find(unkept, "CustomResourceDefinition"))
      expect(crd.metadata.annotations?.["helm.sh/resource-policy"]).toBeUndefined();
  });

  it("tenancy: the operator-only policy is admission-policy.ts's with the release's identities, scoped to its namespace", () => {
    const objs = helmTemplate("mo", "media-ops", [
      "--set",
      "watchNamespace=media-jobs",
      "--set",
      "webhooks.separateDeployment=true",
      "--set-json",
      'tenancy.operatorGroups=["platform-sre"]',
      "--set-json",
      'tenancy.operatorUsers=["alice@example.com"]',
    ]);
    const name = "media-ops-mo-media-orchestrator-operator-only";
    const rendered = [
      one(objs, "ValidatingAdmissionPolicy", name),
      one(objs, "ValidatingAdmissionPolicyBinding", name),
    ];
    const expected = operatorOnlyPolicy({
      name,
      operatorGroups: JSON.stringify(["platform-sre"]),
      operatorUsers: JSON.stringify([
        "system:serviceaccount:media-ops:mo-media-orchestrator",
        "system:serviceaccount:media-ops:mo-media-orchestrator-webhooks",
        "alice@example.com",
      ]),
      namespaces: "media-jobs",
    });
    for (const [i, obj] of rendered.entries()) {
      const { labels: _labels, ...metadata } = obj.metadata;
      expect({ ...obj, metadata }).toEqual(expected[i]);
    }
    // The controller reads only the watched Namespace (its bindings).
    const read = one<Role>(objs, "ClusterRole", "media-ops-mo-media-orchestrator-namespaces");
    expect(read.rules).toEqual([
      {
        apiGroups: [""],
        resources: ["namespaces"],
        verbs: ["get", "list", "watch", "patch"],
        resourceNames: ["media-jobs"],
      },
    ]);
    // Watching every namespace: the policy guards them all, the read covers them all.
    const all = helmTemplate("mo", "media-all", ["--set", "watchAllNamespaces=true"]);
    expect(
      one<Manifest & { spec: Record<string, unknown> }>(
        all,
        "ValidatingAdmissionPolicyBinding",
        "media-all-mo-media-orchestrator-operator-only",
      ).spec.matchResources,
    ).toBeUndefined();
    expect(
      one<Role>(all, "ClusterRole", "media-all-mo-media-orchestrator-namespaces").rules[0],
    ).not.toHaveProperty("resourceNames");
    expect(
      find(
        helmTemplate("mo", "media", ["--set", "tenancy.operatorOnlyPolicy=false"]),
        "ValidatingAdmissionPolicy",
      )
        .map((p) => p.metadata.name)
        .sort(),
    ).toEqual([
      "media-orchestrator-account-binding",
      ...["billingaccount", "gpuendpoint"].map((k) => `media-orchestrator-${k}-rules`),
      "media-orchestrator-mediajob-limits",
      "media-orchestrator-mediajob-rules",
      "media-orchestrator-mediajob-status-rules",
      "media-orchestrator-paymentevent-rules",
    ]);
  });

  it("tenancy: the CRD release's binding policy requires an account when plans or metering are set", () => {
    const required = (args: string[]) => {
      const policy = one<Manifest & { spec: { variables: Array<{ name: string; expression: string }> } }>(
        helmTemplate("media-orchestrator-crds", "media-system", ["--set", "crds.only=true", ...args]),
        "ValidatingAdmissionPolicy",
        "media-orchestrator-account-binding",
      );
      const { labels: _labels, ...metadata } = policy.metadata;
      const flag = policy.spec.variables.find((v) => v.name === "requireAccount")!.expression;
      expect({ ...policy, metadata }).toEqual(accountBindingPolicy(flag)[0]);
      return flag;
    };
    expect(required([])).toBe("false");
    expect(required(["--set", "usage.metering=true"])).toBe("true");
    expect(
      required(["--set-json", 'plans={"price_a":{"gpuSecondsPerPeriod":10,"maxExecutionTimeoutMs":60000}}']),
    ).toBe("true");
    expect(required(["--set", "usage.metering=true", "--set", "tenancy.requireAccount=false"])).toBe("false");
  });

  it("the default values install the CRDs with the operator (a single all-in-one release)", () => {
    const objs = helmTemplate("mo", "media", []);
    expect(find(objs, "CustomResourceDefinition")).toHaveLength(4);
    expect(find(objs, "Deployment")).toHaveLength(1);
    expect(find(objs, "GpuEndpoint")).toHaveLength(0);
  });

  it("renders no generated secret: a render is the same every time (GitOps), the hook creates it", () => {
    const render = () =>
      helm(["template", "mo-dev", CHART_DIR, "-n", "media-dev", "-f", valuesFile("values-dev.yaml")]);
    expect(render().stdout).toBe(render().stdout);
    expect(secretOf(renderEnv("dev"))).toEqual({});
    type Job = Manifest & {
      spec: { template: { spec: { serviceAccountName: string; containers: Container[] } } };
    };
    const objs = renderEnv("dev");
    const job = one<Job>(objs, "Job");
    expect(job.metadata.annotations).toMatchObject({
      "helm.sh/hook": "pre-install,pre-upgrade",
      "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded,hook-failed",
    });
    // One hook: the Job with its ServiceAccount, Role and RoleBinding, so that Helm deletes them
    // together whatever the Job's outcome (on failure Helm deletes only the hook that failed).
    const hooks = helmTemplateDocs("mo-dev", "media-dev", ["-f", valuesFile("values-dev.yaml")]).filter((o) =>
      o.metadata.annotations?.["helm.sh/hook"]?.includes("pre-install"),
    ) as Array<Manifest & { items: Manifest[] }>;
    expect(hooks.map((h) => h.kind)).toEqual(["List"]);
    expect(hooks[0]!.metadata.annotations).toMatchObject({
      "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded,hook-failed",
      "helm.sh/hook-output-log-policy": "hook-failed",
    });
    expect(hooks[0]!.items.map((i) => i.kind)).toEqual(["ServiceAccount", "Role", "RoleBinding", "Job"]);
    const init = job.spec.template.spec.containers[0]!;
    expect(init.image).toBe("media-orchestrator:0.1.0");
    expect(literalEnv(init)).toMatchObject({
      SECRET_NAMESPACE: "media-dev",
      SECRET_NAME: "mo-dev-media-orchestrator-callback",
    });
    // Its ServiceAccount may create Secrets and read only that one.
    expect(one<Role>(objs, "Role", job.spec.template.spec.serviceAccountName).rules).toEqual([
      { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
      {
        apiGroups: [""],
        resources: ["secrets"],
        resourceNames: ["mo-dev-media-orchestrator-callback"],
        verbs: ["get"],
      },
    ]);

    const given = renderEnv("dev", [
      "--set",
      "callback.secret=cb-1-0123456789abcdef0123456789abcdef",
      "--set",
      "secrets.gpuProviderApiKey=gpu-1",
      "--set",
      "secrets.paymentProviderWebhookSecret=whsec_a\\,whsec_b",
    ]);
    expect(secretOf(given)).toEqual({
      CALLBACK_SECRET: "cb-1-0123456789abcdef0123456789abcdef",
      GPU_PROVIDER_API_KEY: "gpu-1",
      PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_a,whsec_b",
    });
    expect(find(given, "Job")).toEqual([]);
    const yours = renderEnv("dev", ["--set", "callback.existingSecret=my-callback"]);
    expect(find(yours, "Job")).toEqual([]);
    const pod = one<Deployment>(yours, "Deployment").spec.template.spec as PodSpecWithVolumes;
    for (const v of pod.volumes.filter((x) => x.projected))
      expect(
        v.projected!.sources.find((src) => src.secret.items.some((i) => i.key === "CALLBACK_SECRET"))!.secret
          .name,
        v.name,
      ).toBe("my-callback");
  });

  it("callback.previousSecret keeps the key before a rotation beside the new one, for both containers", () => {
    const objs = renderEnv("prod", [
      "--set",
      "callback.secret=new-0123456789abcdef0123456789abcdef",
      "--set",
      "callback.previousSecret=old-0123456789abcdef0123456789abcdef",
    ]);
    expect(secretOf(objs)).toMatchObject({
      CALLBACK_SECRET: "new-0123456789abcdef0123456789abcdef",
      CALLBACK_SECRET_PREVIOUS: "old-0123456789abcdef0123456789abcdef",
    });
    const pod = one<Deployment>(objs, "Deployment").spec.template.spec as PodSpecWithVolumes;
    for (const volume of ["controller-secrets", "webhooks-secrets"])
      expect(
        pod.volumes
          .find((v) => v.name === volume)!
          .projected!.sources.filter((s) => s.secret.items.some((i) => i.key.startsWith("CALLBACK_SECRET")))
          .map((s) => [s.secret.name, s.secret.items.map((i) => i.path)]),
      ).toEqual([
        ["mo-prod-media-orchestrator", ["CALLBACK_SECRET"]],
        ["mo-prod-media-orchestrator", ["CALLBACK_SECRET_PREVIOUS"]],
      ]);
  });

  it("an existing Secret supplies every credential and the chart creates none", () => {
    const objs = renderEnv("prod", ["--set", "secrets.existingSecret=media-credentials"]);
    expect(find(objs, "Secret")).toEqual([]);
    const pod = one<Deployment>(objs, "Deployment").spec.template.spec as PodSpecWithVolumes;
    const refs = pod.volumes.flatMap((v) =>
      (v.projected?.sources ?? []).flatMap((s) =>
        s.secret.items.map((i) => `${v.name}: ${s.secret.name}/${i.key}`),
      ),
    );
    expect(refs).toEqual([
      "controller-secrets: media-credentials/GPU_PROVIDER_API_KEY",
      "controller-secrets: mo-prod-media-orchestrator-callback/CALLBACK_SECRET",
      "controller-secrets: mo-prod-media-orchestrator-callback/CALLBACK_SECRET_PREVIOUS",
      "webhooks-secrets: media-credentials/GPU_PROVIDER_API_KEY",
      "webhooks-secrets: media-credentials/PAYMENT_PROVIDER_API_KEY",
      "webhooks-secrets: media-credentials/PAYMENT_PROVIDER_WEBHOOK_SECRET",
      "webhooks-secrets: mo-prod-media-orchestrator-callback/CALLBACK_SECRET",
      "webhooks-secrets: mo-prod-media-orchestrator-callback/CALLBACK_SECRET_PREVIOUS",
    ]);
  });

  it("gives the sidecar its own restricted GPU key when one is given, as a value or a key of your Secret", () => {
    const webhooksGpuKey = (args: string[]) => {
      const pod = one<Deployment>(renderEnv("prod", args), "Deployment").spec.template
        .spec as PodSpecWithVolumes;
      const keyOf = (volume: string) =>
        pod.volumes
          .find((v) => v.name === volume)!
          .projected!.sources.flatMap((s) => s.secret.items)
          .find((i) => i.path === "GPU_PROVIDER_API_KEY")!.key;
      return [keyOf("controller-secrets"), keyOf("webhooks-secrets")];
    };
    expect(webhooksGpuKey([])).toEqual(["GPU_PROVIDER_API_KEY", "GPU_PROVIDER_API_KEY"]);
    expect(
      webhooksGpuKey([
        "--set",
        "secrets.existingSecret=media-credentials",
        "--set",
        "secrets.webhooksGpuProviderApiKeyKey=GPU_PROVIDER_STATUS_KEY",
      ]),
    ).toEqual(["GPU_PROVIDER_API_KEY", "GPU_PROVIDER_STATUS_KEY"]);
    const given = renderEnv("prod", ["--set", "secrets.webhooksGpuProviderApiKey=rpa_status_only"]);
    const data = one<Manifest & { data: Record<string, string> }>(given, "Secret").data;
    expect(Buffer.from(data.WEBHOOKS_GPU_PROVIDER_API_KEY!, "base64").toString()).toBe("rpa_status_only");
    expect(webhooksGpuKey(["--set", "secrets.webhooksGpuProviderApiKey=rpa_status_only"])).toEqual([
      "GPU_PROVIDER_API_KEY",
      "WEBHOOKS_GPU_PROVIDER_API_KEY",
    ]);
  });

  it("the Deployment carries nothing derived from a secret value (the files are re-read instead of rolling the pods)", () => {
    const render = (key: string) =>
      helm([
        "template",
        "mo-dev",
        CHART_DIR,
        "-n",
        "media-dev",
        "-f",
        valuesFile("values-dev.yaml"),
        "--set",
        `secrets.gpuProviderApiKey=${key}`,
        "--set",
        "secrets.paymentProviderWebhookSecret=whsec_guessable",
      ]).stdout;
    const deploymentOf = (text: string) => text.split(/^---$/m).find((d) => /^kind: Deployment$/m.test(d))!;
    // A reader of Deployments (not of Secrets) learns nothing: two keys render the same Deployment,
    // with no hash a guess could be checked against offline.
    expect(deploymentOf(render("gpu-key-a"))).toBe(deploymentOf(render("gpu-key-b")));
    expect(deploymentOf(render("gpu-key-a"))).not.toMatch(/checksum|[0-9a-f]{64}/);
  });

  it("the Ingress exposes only the two inbound routes and becomes the callback URL", () => {
    const objs = renderEnv("prod", [
      "--set",
      "ingress.enabled=true",
      "--set",
      "ingress.host=media.example.com",
      "--set",
      "ingress.tls.enabled=true",
      "--set",
      "ingress.className=nginx",
    ]);
    type IngressSpec = {
      ingressClassName: string;
      tls: unknown[];
      rules: Array<{ host: string; http: { paths: Array<Record<string, unknown>> } }>;
    };
    const ing = one<Manifest & { spec: IngressSpec }>(objs, "Ingress");
    expect(ing.spec).toMatchObject({
      ingressClassName: "nginx",
      tls: [{ hosts: ["media.example.com"], secretName: "mo-prod-media-orchestrator-tls" }],
    });
    expect(ing.spec.rules.map((r) => r.host)).toEqual(["media.example.com"]);
    const paths = ing.spec.rules[0]!.http.paths;
    expect(paths.map((p) => [p.path, p.pathType])).toEqual([
      ["/webhooks/", "Prefix"],
      ["/reports/", "Prefix"],
    ]);
    const env = envOf(one<Deployment>(objs, "Deployment").spec.template.spec.containers[0]!);
    expect(env.get("CALLBACK_BASE_URL")?.value).toBe("https://media.example.com");
    const explicit = renderEnv("prod", ["--set", "callback.baseUrl=https://hooks.example.com/"]);
    expect(
      envOf(one<Deployment>(explicit, "Deployment").spec.template.spec.containers[1]!).get(
        "CALLBACK_BASE_URL",
      )?.value,
    ).toBe("https://hooks.example.com");
  });

  it("the ServiceMonitor scrapes both containers", () => {
    const objs = renderEnv("prod", [
      "--api-versions",
      "monitoring.coreos.com/v1/ServiceMonitor",
      "--set",
      "serviceMonitor.enabled=true",
      "--set",
      "serviceMonitor.labels.release=prom",
    ]);
    const sm = one<Manifest & { spec: { endpoints: Array<{ port: string; path: string }> } }>(
      objs,
      "ServiceMonitor",
    );
    expect(sm.metadata.labels?.release).toBe("prom");
    expect(sm.spec.endpoints.map((e) => [e.port, e.path])).toEqual([
      ["webhooks", "/metrics"],
      ["metrics", "/metrics"],
    ]);
  });

  it("one replica gets no PodDisruptionBudget (it could never be evicted)", () => {
    expect(find(renderEnv("prod", ["--set", "replicaCount=1"]), "PodDisruptionBudget")).toEqual([]);
  });
});

describe("helm template, production options", () => {
  const deploymentOf = (objs: Manifest[]) => one<Deployment>(objs, "Deployment");
  const podOf = (args: string[], env = "prod") => deploymentOf(renderEnv(env, args)).spec.template.spec;

  it("renders the image as registry/repository:tag@digest, the parts given", () => {
    const digest = `sha256:${"ab".repeat(32)}`;
    const image = (args: string[], env = "prod") => podOf(args, env).containers.map((c) => c.image);
    expect(image([], "dev")).toEqual(["media-orchestrator:0.1.0", "media-orchestrator:0.1.0"]);
    expect(image(["--set", "image.registry=ghcr.io/acme", "--set", "image.tag=1.2.3"], "dev")).toEqual([
      "ghcr.io/acme/media-orchestrator:1.2.3",
      "ghcr.io/acme/media-orchestrator:1.2.3",
    ]);
    const pinned = renderEnv("prod", [
      "--set",
      "image.registry=ghcr.io/acme",
      "--set",
      `image.digest=${digest}`,
    ]);
    const images = pinned.flatMap((o) => {
      const spec = (o as { spec?: { template?: { spec?: PodSpec }; containers?: Container[] } }).spec;
      return [...(spec?.template?.spec?.containers ?? []), ...(spec?.containers ?? [])].map((c) => c.image);
    });
    // Every container of the release: the two of the pod, the hook Job's and the test pod's.
    expect(images).toHaveLength(4);
    expect(new Set(images)).toEqual(new Set([`ghcr.io/acme/media-orchestrator:0.1.0@${digest}`]));
  });

  it("refuses a plain-HTTP callback URL outside dev, given or derived; dev may use the in-cluster URL", () => {
    for (const args of [
      ["--set", "callback.baseUrl=http://hooks.example.com"],
      ["--set", "ingress.tls.enabled=false"],
      ["--set", "ingress.enabled=false"],
    ]) {
      const res = helm([
        "template",
        "mo-prod",
        CHART_DIR,
        "-n",
        "media-prod",
        "-f",
        valuesFile("values-prod.yaml"),
        ...hostArgs("prod"),
        ...args,
      ]);
      expect(res.status, args.join(" ")).not.toBe(0);
      expect(res.stderr).toContain("is plain HTTP");
      expect(res.stderr).toContain("callback.baseUrl");
    }
    const https = podOf([
      "--set",
      "ingress.enabled=false",
      "--set",
      "callback.baseUrl=https://hooks.example.com",
    ]);
    expect(envOf(https.containers[0]!).get("CALLBACK_BASE_URL")?.value).toBe("https://hooks.example.com");
    const dev = podOf([], "dev");
    expect(envOf(dev.containers[0]!).get("CALLBACK_BASE_URL")?.value).toMatch(/^http:\/\//);
  });

  it("takes the pod's and the containers' security contexts from values (no fixed uid required)", () => {
    // An OpenShift restricted-v2 style: the platform assigns the uid, nothing pins one.
    const pod = podOf([
      "--set-json",
      'podSecurityContext={"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"},"fsGroupChangePolicy":"OnRootMismatch"}',
      "--set",
      "containerSecurityContext.runAsUser=1000720000",
    ]);
    expect(pod.securityContext).toEqual({
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
      fsGroupChangePolicy: "OnRootMismatch",
    });
    for (const c of pod.containers) expect(c.securityContext.runAsUser).toBe(1000720000);
    expect(podOf([]).securityContext.runAsUser).toBeUndefined();
  });

  it("tunes the probes per container, keeping their routes", () => {
    const pod = podOf([
      "--set",
      "probes.controller.liveness.periodSeconds=60",
      "--set",
      "probes.webhooks.readiness.initialDelaySeconds=3",
    ]);
    const [controller, webhooks] = pod.containers;
    expect(controller!.livenessProbe).toEqual({
      httpGet: { path: "/healthz", port: "metrics" },
      periodSeconds: 60,
      timeoutSeconds: 5,
      failureThreshold: 3,
    });
    expect(webhooks!.readinessProbe).toEqual({
      httpGet: { path: "/readyz", port: "webhooks" },
      initialDelaySeconds: 3,
      periodSeconds: 5,
      timeoutSeconds: 3,
    });
  });

  it("bounds the sidecar's heap by its container's memory limit (40 %), unless NODE_OPTIONS is given", () => {
    const nodeOptions = (args: string[]) =>
      podOf(args).containers.map((c) => [c.name, envOf(c).get("NODE_OPTIONS")?.value]);
    // Without the bound V8 sized its heap from the node's memory and let garbage take the
    // sidecar past its memory limit (docs/webhooks.md, "Memory"). The default limit is 288Mi.
    expect(nodeOptions([])).toEqual([
      ["controller", undefined],
      ["webhooks", "--max-old-space-size=115"],
    ]);
    for (const [limit, mib] of [
      ["512Mi", 204],
      ["1Gi", 409],
      ["300M", 114],
      ["268435456", 102],
    ] as const)
      expect(nodeOptions(["--set", `resources.webhooks.limits.memory=${limit}`])[1], limit).toEqual([
        "webhooks",
        `--max-old-space-size=${mib}`,
      ]);
    expect(nodeOptions(["--set", "resources.webhooks.limits.memory=null"])[1]).toEqual([
      "webhooks",
      undefined,
    ]);
    expect(
      nodeOptions([
        "--set",
        "extraEnv[0].name=NODE_OPTIONS",
        "--set",
        "extraEnv[0].value=--max-old-space-size=150",
      ]),
    ).toEqual([
      ["controller", "--max-old-space-size=150"],
      ["webhooks", "--max-old-space-size=150"],
    ]);
    const bad = helm(["template", "mo", CHART_DIR, "--set", "resources.webhooks.limits.memory=1.5Gi"]);
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain("resources.webhooks.limits.memory");
    expect(bad.stderr).toContain("1536Mi");
    // The separate Deployment's sidecar gets the same bound.
    const separate = find<Deployment>(
      renderEnv("prod", ["--set", "webhooks.separateDeployment=true"]),
      "Deployment",
      "mo-prod-media-orchestrator-webhooks",
    );
    expect(envOf(separate[0]!.spec.template.spec.containers[0]!).get("NODE_OPTIONS")?.value).toBe(
      "--max-old-space-size=115",
    );
  });

  it("passes the unconfirmed-submission policy through the environment, and the product reads it", () => {
    const pod = podOf(["--set", "unconfirmedSubmissionPolicy=resubmit"]);
    for (const c of pod.containers)
      expect(parseEnv({ ...literalEnv(c), GPU_PROVIDER_API_KEY: "k", CALLBACK_SECRET: "s" })).toMatchObject({
        UNCONFIRMED_SUBMISSION_POLICY: "resubmit",
      });
  });

  it("passes plans, the cancel-follow warning and the deletion's usage wait through the environment, and the product reads them", () => {
    const plan = { gpuSecondsPerPeriod: 36_000, maxConcurrentJobs: 4, maxExecutionTimeoutMs: 600_000 };
    const pod = podOf([
      "--set-json",
      `plans=${JSON.stringify({ price_small: plan })}`,
      "--set",
      "cancelFollowWarningSeconds=60",
      "--set",
      "deleteUsageTimeoutSeconds=0",
    ]);
    for (const c of pod.containers)
      expect(parseEnv({ ...literalEnv(c), GPU_PROVIDER_API_KEY: "k", CALLBACK_SECRET: "s" })).toMatchObject({
        MEDIA_PLANS: { price_small: plan },
        CANCEL_FOLLOW_WARNING_SECONDS: 60,
        DELETE_USAGE_TIMEOUT_SECONDS: 0,
      });
    // A plan the provider could not honour is refused by the chart, before any pod starts.
    const bad = helm([
      "template",
      "mo",
      CHART_DIR,
      "--set-json",
      `plans=${JSON.stringify({ price_small: { ...plan, maxExecutionTimeoutMs: 1000 } })}`,
    ]);
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toMatch(/maxExecutionTimeoutMs/);
  });

  it("passes the fair-share settings through the environment, and the product reads them", () => {
    const pod = podOf([
      "--set",
      "fairShare.weights.cus_A=2",
      "--set",
      "fairShare.weights.cus_B=1.5",
      "--set",
      "fairShare.jobSeconds=45",
    ]);
    for (const c of pod.containers) {
      const env = parseEnv({ ...literalEnv(c), GPU_PROVIDER_API_KEY: "k", CALLBACK_SECRET: "s" });
      expect(env).toMatchObject({ FAIR_SHARE_WINDOW: true, FAIR_SHARE_JOB_SECONDS: 45 });
      expect(fairShareWeights(env)).toEqual(
        new Map([
          ["cus_A", 2],
          ["cus_B", 1.5],
        ]),
      );
    }
  });

  it("passes the leader-election durations through the environment, and the product reads them", () => {
    const pod = podOf([
      "--set",
      "leaderElection.leaseDurationSeconds=60",
      "--set",
      "leaderElection.renewDeadlineSeconds=40",
      "--set",
      "leaderElection.retryPeriodSeconds=8",
    ]);
    const parsed = parseEnv({
      ...literalEnv(pod.containers[0]!),
      GPU_PROVIDER_API_KEY: "k",
      CALLBACK_SECRET: "s",
    });
    expect(parsed).toMatchObject({
      LEADER_ELECTION_LEASE_DURATION_SECONDS: 60,
      LEADER_ELECTION_RENEW_DEADLINE_SECONDS: 40,
      LEADER_ELECTION_RETRY_PERIOD_SECONDS: 8,
    });
  });

  it("the product refuses leader-election timings the chart refuses (extraEnv cannot get around it)", () => {
    const base = { GPU_PROVIDER_API_KEY: "k", CALLBACK_SECRET: "s" };
    expect(() => parseEnv({ ...base, LEADER_ELECTION_RENEW_DEADLINE_SECONDS: "15" })).toThrow(
      "LEADER_ELECTION_LEASE_DURATION_SECONDS: must be greater than LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
    );
    expect(() => parseEnv({ ...base, LEADER_ELECTION_RETRY_PERIOD_SECONDS: "10" })).toThrow(
      "LEADER_ELECTION_RENEW_DEADLINE_SECONDS: must be greater than LEADER_ELECTION_RETRY_PERIOD_SECONDS",
    );
    expect(parseEnv(base)).toMatchObject({
      LEADER_ELECTION_LEASE_DURATION_SECONDS: 15,
      LEADER_ELECTION_RENEW_DEADLINE_SECONDS: 10,
      LEADER_ELECTION_RETRY_PERIOD_SECONDS: 2,
    });
  });

  it("only the operator's pods carry its selector labels (not the hook's, not the test's)", () => {
    const objs = renderEnv("prod");
    const selector = {
      "app.kubernetes.io/name": "media-orchestrator",
      "app.kubernetes.io/instance": "mo-prod",
    };
    const matches = (labels: Record<string, string> = {}) =>
      Object.entries(selector).every(([k, v]) => labels[k] === v);
    const podLabels = objs.flatMap((o) => {
      if (o.kind === "Pod") return [[o.kind, o.metadata.labels]] as const;
      const tpl = (o as { spec?: { template?: { metadata?: { labels?: Record<string, string> } } } }).spec
        ?.template;
      return tpl ? ([[o.kind, tpl.metadata?.labels]] as const) : [];
    });
    expect(podLabels.map(([kind]) => kind).sort()).toEqual(["Deployment", "Job", "Pod"]);
    for (const [kind, labels] of podLabels) expect(matches(labels), kind).toBe(kind === "Deployment");
  });

  it("extraEnv replaces a variable the chart sets and adds the others, each once", () => {
    const pod = podOf([
      "--set-json",
      'extraEnv=[{"name":"LOG_LEVEL","value":"warn"},{"name":"WEBHOOK_TOLERANCE_SECONDS","value":"120"}]',
    ]);
    for (const c of pod.containers) {
      const names = c.env.map((e) => e.name);
      expect(
        names.filter((n) => n === "LOG_LEVEL"),
        c.name,
      ).toHaveLength(1);
      expect(new Set(names).size, c.name).toBe(names.length);
      expect(envOf(c).get("LOG_LEVEL")?.value).toBe("warn");
      expect(envOf(c).get("WEBHOOK_TOLERANCE_SECONDS")?.value).toBe("120");
    }
  });

  it("fills the release's selector into topology spread constraints that have none", () => {
    const pod = podOf([
      "--set-json",
      'topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"},{"maxSkew":2,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"tier":"hooks"}}}]',
    ]) as PodSpec & { topologySpreadConstraints: Array<Record<string, unknown>> };
    expect(pod.topologySpreadConstraints).toEqual([
      {
        maxSkew: 1,
        topologyKey: "topology.kubernetes.io/zone",
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: {
          matchLabels: {
            "app.kubernetes.io/name": "media-orchestrator",
            "app.kubernetes.io/instance": "mo-prod",
          },
        },
      },
      {
        maxSkew: 2,
        topologyKey: "kubernetes.io/hostname",
        whenUnsatisfiable: "DoNotSchedule",
        labelSelector: { matchLabels: { tier: "hooks" } },
      },
    ]);
  });

  it("the PodDisruptionBudget takes maxUnavailable and an unhealthy-pod eviction policy", () => {
    const pdbOf = (args: string[]) =>
      one<Manifest & { spec: Record<string, unknown> }>(renderEnv("prod", args), "PodDisruptionBudget").spec;
    expect(pdbOf([])).toMatchObject({ minAvailable: 1, unhealthyPodEvictionPolicy: "AlwaysAllow" });
    const max = pdbOf([
      "--set",
      "podDisruptionBudget.maxUnavailable=1",
      "--set",
      "podDisruptionBudget.unhealthyPodEvictionPolicy=IfHealthyBudget",
    ]);
    expect(max).toMatchObject({ maxUnavailable: 1, unhealthyPodEvictionPolicy: "IfHealthyBudget" });
    expect(max.minAvailable).toBeUndefined();
    expect(
      pdbOf(["--set", "podDisruptionBudget.unhealthyPodEvictionPolicy="]).unhealthyPodEvictionPolicy,
    ).toBeUndefined();
  });

  it("usage metering: off by default; on, the controller also gets the payment API key (never the signing secret)", () => {
    const controllerOf = (args: string[]) => {
      const d = one<Manifest & { spec: { template: { spec: PodSpecWithVolumes } } }>(
        renderEnv("prod", args),
        "Deployment",
      );
      const pod = d.spec.template.spec;
      const c = pod.containers.find((x) => x.name === "controller")!;
      const env = Object.fromEntries(
        (c.env as Array<{ name: string; value?: string }>).map((e) => [e.name, e.value]),
      );
      const keys = pod.volumes
        .filter((v) => v.name === "controller-secrets")
        .flatMap((v) => v.projected!.sources.flatMap((s) => s.secret.items.map((i) => i.key)));
      return { env, keys };
    };
    const off = controllerOf([]);
    expect(off.env).toMatchObject({ USAGE_METERING: "false", USAGE_BILLED_TIME: "execution" });
    expect(off.keys).not.toContain("PAYMENT_PROVIDER_API_KEY");
    const on = controllerOf([
      "--set",
      "usage.metering=true",
      "--set",
      "usage.billedTime=executionAndDelay",
      "--set",
      "usage.queueWaitBillingAcknowledged=true",
      "--set",
      "usage.meterEventNames.render=render_seconds",
      "--set",
      "usage.meterEventNames.asr=asr_seconds",
    ]);
    expect(on.env).toMatchObject({
      USAGE_METERING: "true",
      USAGE_BILLED_TIME: "executionAndDelay",
      USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED: "true",
      USAGE_METER_EVENT_NAME: "gpu_seconds",
      USAGE_METER_EVENT_NAMES: "asr=asr_seconds,render=render_seconds",
    });
    expect(on.keys).toContain("PAYMENT_PROVIDER_API_KEY");
    expect(on.keys).not.toContain("PAYMENT_PROVIDER_WEBHOOK_SECRET");
    // The values a typo would get wrong are refused by the chart's schema.
    expect(() => renderEnv("prod", ["--set", "usage.billedTime=wall"])).toThrow(/billedTime/);
    // Queue wait is billed only when acknowledged (docs/design.md, "Provider billing facts").
    expect(() => renderEnv("prod", ["--set", "usage.billedTime=executionAndDelay"])).toThrow(
      /queueWaitBillingAcknowledged=true/,
    );
  });

  it("renders the ServiceMonitor and PrometheusRule only where their API is served, or when told to", () => {
    const on = [
      "--set",
      "serviceMonitor.enabled=true",
      "--set",
      "prometheusRule.enabled=true",
      "--set",
      `prometheusRule.runbookBaseUrl=${RUNBOOKS}`,
    ];
    expect(
      kinds(renderEnv("prod", on)).filter(
        (k) => k.startsWith("ServiceMonitor") || k.startsWith("Prometheus"),
      ),
    ).toEqual([]);
    const served = renderEnv("prod", [
      ...on,
      "--api-versions",
      "monitoring.coreos.com/v1/ServiceMonitor",
      "--api-versions",
      "monitoring.coreos.com/v1/PrometheusRule",
    ]);
    expect(find(served, "ServiceMonitor")).toHaveLength(1);
    const rule = one<
      Manifest & { spec: { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> } }
    >(served, "PrometheusRule");
    expect(rule.spec.groups[0]!.rules.map((r) => r.alert)).toEqual([
      "MediaOrchestratorNoLeader",
      "MediaOrchestratorReconcileErrors",
      "MediaOrchestratorWebhooksDown",
      "MediaOrchestratorJobsStuck",
      "MediaOrchestratorJobRunningAfterCancel",
      "MediaOrchestratorSubmissionsFailing",
      "MediaOrchestratorProviderKeyInvalid",
      "MediaOrchestratorEndpointNotReady",
      "MediaOrchestratorWorkQueueGrowing",
      "MediaOrchestratorCallbacksUnauthorized",
      "MediaOrchestratorCallbackAdoptionHeld",
      "MediaOrchestratorPaymentSignatureFailures",
      "MediaOrchestratorUsageBacklogOld",
      "MediaOrchestratorUsageAccountMissing",
      "MediaOrchestratorMeterEventsRefused",
      "MediaOrchestratorMeterMisconfigured",
      "MediaOrchestratorCostRecoveryLow",
    ]);
    const forced = renderEnv("prod", [
      ...on,
      "--set",
      "serviceMonitor.skipCapabilityCheck=true",
      "--set",
      "prometheusRule.skipCapabilityCheck=true",
    ]);
    expect(find(forced, "ServiceMonitor")).toHaveLength(1);
    expect(find(forced, "PrometheusRule")).toHaveLength(1);
  });

  it("renders the Grafana dashboard ConfigMap only when enabled, labelled for Grafana's sidecar", () => {
    const dashboards = (args: string[]) =>
      find(renderEnv("prod", args), "ConfigMap").filter((c) => c.metadata.labels?.grafana_dashboard);
    expect(dashboards([])).toEqual([]);
    const [cm] = dashboards([
      "--set",
      "grafanaDashboard.enabled=true",
      "--set",
      "grafanaDashboard.namespace=monitoring",
      "--set",
      "grafanaDashboard.folder=Media",
    ]) as Array<Manifest & { data: Record<string, string> }>;
    expect(cm!.metadata.labels!.grafana_dashboard).toBe("1");
    expect(cm!.metadata.namespace).toBe("monitoring");
    expect(cm!.metadata.annotations?.grafana_folder).toBe("Media");
    const dashboard = JSON.parse(cm!.data["media-orchestrator.json"]!) as { uid: string; panels: unknown[] };
    expect(dashboard.uid).toBe("media-orchestrator");
    expect(dashboard.panels.length).toBeGreaterThan(10);
  });

  it("serviceAccount.automountToken sets the pod's automountServiceAccountToken", () => {
    type WithToken = PodSpec & { automountServiceAccountToken: boolean };
    expect((podOf([]) as WithToken).automountServiceAccountToken).toBe(true);
    expect(
      (podOf(["--set", "serviceAccount.automountToken=false"]) as WithToken).automountServiceAccountToken,
    ).toBe(false);
  });

  it("prod's NetworkPolicy: webhooks from the ingress controller, metrics from monitoring, egress DNS, API server, HTTPS", () => {
    type Peer = Record<string, unknown>;
    type Rule = { from?: Peer[]; to?: Peer[]; ports: Array<{ port: number | string; protocol: string }> };
    const np = one<
      Manifest & { spec: { podSelector: unknown; policyTypes: string[]; ingress: Rule[]; egress: Rule[] } }
    >(renderEnv("prod"), "NetworkPolicy", "mo-prod-media-orchestrator");
    expect(np.spec.podSelector).toEqual({
      matchLabels: {
        "app.kubernetes.io/name": "media-orchestrator",
        "app.kubernetes.io/instance": "mo-prod",
      },
    });
    expect(np.spec.policyTypes).toEqual(["Ingress", "Egress"]);
    const [webhooks, metrics, test] = np.spec.ingress;
    expect(webhooks).toEqual({
      from: [
        {
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress-nginx" } },
          podSelector: {},
        },
      ],
      ports: [{ port: "webhooks", protocol: "TCP" }],
    });
    expect(metrics!.from).toEqual([
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } },
        podSelector: {},
      },
    ]);
    expect(metrics!.ports.map((p) => p.port)).toEqual(["webhooks", "metrics"]);
    expect(test!.from).toEqual([
      {
        podSelector: {
          matchLabels: { "app.kubernetes.io/instance": "mo-prod", "app.kubernetes.io/component": "test" },
        },
      },
    ]);
    expect(np.spec.ingress).toHaveLength(3);
    const [dns, apiServer, https] = np.spec.egress;
    expect(dns!.to).toEqual([
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
        podSelector: { matchLabels: { "k8s-app": "kube-dns" } },
      },
    ]);
    expect(dns!.ports).toEqual([
      { port: 53, protocol: "UDP" },
      { port: 53, protocol: "TCP" },
    ]);
    // Only the API server's addresses: a rule without them would allow every address on 443,
    // cancelling the private ranges' exclusion from the providers' rule below.
    expect(apiServer).toEqual({
      to: [{ ipBlock: { cidr: API_SERVER } }],
      ports: [
        { port: 443, protocol: "TCP" },
        { port: 6443, protocol: "TCP" },
      ],
    });
    expect(https).toEqual({
      to: [{ ipBlock: { cidr: "0.0.0.0/0", except: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"] } }],
      ports: [{ port: 443, protocol: "TCP" }],
    });
    expect(np.spec.egress).toHaveLength(3);
    // The selectors are settable; the API server narrowed to its addresses.
    const custom = one<Manifest & { spec: { ingress: Rule[]; egress: Rule[] } }>(
      renderEnv("prod", [
        "--set-json",
        'networkPolicy.ingress.webhooks={"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"edge"}},"podSelector":{"matchLabels":{"app":"envoy"}}}',
        "--set",
        "networkPolicy.egress.apiServer.cidrs={172.20.0.1/32}",
      ]),
      "NetworkPolicy",
      "mo-prod-media-orchestrator",
    );
    expect(custom.spec.ingress[0]!.from).toEqual([
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "edge" } },
        podSelector: { matchLabels: { app: "envoy" } },
      },
    ]);
    expect(custom.spec.egress[1]!.to).toEqual([{ ipBlock: { cidr: "172.20.0.1/32" } }]);
    expect(find(renderEnv("staging"), "NetworkPolicy")).toEqual([]);
  });

  it("with policies on, every pod the chart creates is selected by a policy: the operator's, the hook's, the test pod's", () => {
    type Selector = { matchLabels?: Record<string, string> };
    type Policy = Manifest & {
      spec: {
        podSelector: Selector;
        policyTypes: string[];
        ingress?: unknown[];
        egress: Array<{ to?: unknown[] }>;
      };
    };
    const check = (objs: Manifest[]) => {
      const policies = find<Policy>(objs, "NetworkPolicy");
      const pods = objs.flatMap((o) => {
        if (o.kind === "Pod") return [[o.metadata.name, o.metadata.labels ?? {}] as const];
        const tpl = (o as { spec?: { template?: { metadata?: { labels?: Record<string, string> } } } }).spec
          ?.template;
        return tpl ? [[`${o.kind}/${o.metadata.name}`, tpl.metadata?.labels ?? {}] as const] : [];
      });
      expect(pods.length).toBeGreaterThanOrEqual(3);
      for (const [name, labels] of pods) {
        const covering = policies.filter((p) =>
          Object.entries(p.spec.podSelector.matchLabels ?? {}).every(([k, v]) => labels[k] === v),
        );
        expect(covering.length, `${name} is selected by a NetworkPolicy`).toBeGreaterThan(0);
        for (const p of covering) {
          expect(p.spec.policyTypes, p.metadata.name).toEqual(["Ingress", "Egress"]);
          // No egress rule without a destination (it would allow every address).
          for (const rule of p.spec.egress) expect(rule.to?.length, p.metadata.name).toBeGreaterThan(0);
        }
      }
      return policies;
    };
    const policies = check(renderEnv("prod"));
    // The hook's policy is part of the hook (it must exist before the hook's pod runs).
    const hook = helmTemplateDocs("mo-prod", "media-prod", [
      "-f",
      valuesFile("values-prod.yaml"),
      ...hostArgs("prod"),
    ]).find((o) => o.kind === "List") as Manifest & { items: Manifest[] };
    expect(hook.items.map((i) => i.kind)).toContain("NetworkPolicy");
    // The test pod and the hook receive nothing.
    for (const name of ["mo-prod-media-orchestrator-test", "mo-prod-media-orchestrator-callback-init"])
      expect(policies.find((p) => p.metadata.name === name)!.spec.ingress ?? []).toEqual([]);
    check(renderEnv("prod", ["--set", "webhooks.separateDeployment=true"]));
  });

  it("webhooks.trustedProxies becomes WEBHOOKS_TRUSTED_PROXIES; the Ingress without it is refused, naming the value", () => {
    const pod = podOf(["--set", "webhooks.trustedProxies={10.244.0.0/16,fd00::/64}"]);
    for (const c of pod.containers) {
      expect(envOf(c).get("WEBHOOKS_TRUSTED_PROXIES")?.value, c.name).toBe("10.244.0.0/16,fd00::/64");
      expect(
        parseEnv({ ...literalEnv(c), GPU_PROVIDER_API_KEY: "k", CALLBACK_SECRET: "c".repeat(64) }),
      ).toMatchObject({
        WEBHOOKS_TRUSTED_PROXIES: "10.244.0.0/16,fd00::/64",
      });
    }
    for (const env of ["staging", "prod"]) {
      const args = hostArgs(env);
      const i = args.findIndex((a) => a.startsWith("webhooks.trustedProxies="));
      const res = helm([
        "template",
        "mo",
        CHART_DIR,
        "-f",
        valuesFile(`values-${env}.yaml`),
        ...args.slice(0, i - 1),
        ...args.slice(i + 1),
      ]);
      expect(res.status, env).not.toBe(0);
      expect(res.stderr).toContain("at '/webhooks/trustedProxies'");
    }
    // Without the Ingress (dev) no proxy is needed, and none is set.
    expect(envOf(podOf([], "dev").containers[0]!).get("WEBHOOKS_TRUSTED_PROXIES")).toBeUndefined();
  });

  it("webhooks.separateDeployment: the sidecar in its own Deployment, with its own ServiceAccount and only its rules", () => {
    const objs = renderEnv("prod", ["--set", "webhooks.separateDeployment=true"]);
    const deployments = find<Deployment & { spec: { selector: Selector } }>(objs, "Deployment");
    type Selector = { matchLabels: Record<string, string> };
    expect(
      deployments.map((d) => [d.metadata.name, d.spec.template.spec.containers.map((c) => c.name)]),
    ).toEqual([
      ["mo-prod-media-orchestrator-controller", ["controller"]],
      ["mo-prod-media-orchestrator-webhooks", ["webhooks"]],
    ]);
    const [controller, webhooks] = deployments;
    expect(controller!.spec.template.spec.serviceAccountName).toBe("mo-prod-media-orchestrator");
    expect(webhooks!.spec.template.spec.serviceAccountName).toBe("mo-prod-media-orchestrator-webhooks");
    // Selectors that do not overlap; both keep the labels the Service and the policy select.
    expect(controller!.spec.selector.matchLabels["app.kubernetes.io/component"]).toBe("controller");
    expect(webhooks!.spec.selector.matchLabels["app.kubernetes.io/component"]).toBe("webhooks");
    expect(find(objs, "ServiceAccount").map((a) => a.metadata.name)).toContain(
      "mo-prod-media-orchestrator-webhooks",
    );
    expect(one<Role>(objs, "Role", "mo-prod-media-orchestrator").rules).toEqual(CONTROLLER_RULES);
    expect(one<Role>(objs, "Role", "mo-prod-media-orchestrator-webhooks").rules).toEqual(WEBHOOKS_RULES);
    expect(one<Binding>(objs, "RoleBinding", "mo-prod-media-orchestrator-webhooks").subjects).toEqual([
      { kind: "ServiceAccount", name: "mo-prod-media-orchestrator-webhooks", namespace: "media-prod" },
    ]);
    // The Lease is the controller's alone; the lone sidecar collects old PaymentEvents in every replica.
    expect(one<Binding>(objs, "RoleBinding", "mo-prod-media-orchestrator-leader-election").subjects).toEqual([
      { kind: "ServiceAccount", name: "mo-prod-media-orchestrator", namespace: "media-prod" },
    ]);
    expect(envOf(webhooks!.spec.template.spec.containers[0]!).get("LEADER_ELECTION")?.value).toBe("false");
    expect(envOf(controller!.spec.template.spec.containers[0]!).get("LEADER_ELECTION")?.value).toBe("true");
    // The two together are the pod's rules: nothing lost by splitting.
    const union = (rules: Array<Record<string, unknown>>) =>
      new Set(
        rules.flatMap((r) =>
          (r.resources as string[]).flatMap((res) => (r.verbs as string[]).map((v) => `${res}:${v}`)),
        ),
      );
    expect(union([...CONTROLLER_RULES, ...WEBHOOKS_RULES])).toEqual(union(EXPECTED_RULES as never));
    // One disruption budget per Deployment.
    expect(
      find<Manifest & { spec: { selector: Selector } }>(objs, "PodDisruptionBudget").map(
        (p) => p.spec.selector.matchLabels["app.kubernetes.io/component"],
      ),
    ).toEqual(["controller", "webhooks"]);
  });

  it("two releases watching one namespace share its Lease; a watch-all release uses the cluster's", () => {
    const leaseOf = (objs: Manifest[]) => {
      const env = envOf(deploymentOf(objs).spec.template.spec.containers[0]!);
      return [env.get("LEADER_ELECTION_NAMESPACE")?.value, env.get("LEADER_ELECTION_ID")?.value];
    };
    const a = helmTemplate("mo-a", "media-jobs", []);
    const b = helmTemplate("mo-b", "media-ops", ["--set", "watchNamespace=media-jobs"]);
    expect(leaseOf(a)).toEqual(["media-jobs", "media-orchestrator-ns-media-jobs"]);
    expect(leaseOf(b)).toEqual(leaseOf(a));
    const all1 = helmTemplate("mo-x", "ops-1", ["--set", "watchAllNamespaces=true"]);
    const all2 = helmTemplate("mo-y", "ops-2", ["--set", "watchAllNamespaces=true"]);
    expect(leaseOf(all1)).toEqual(["kube-system", "media-orchestrator-cluster"]);
    expect(leaseOf(all2)).toEqual(leaseOf(all1));
  });

  it("the CRD release aggregates read access into view and MediaJob writes into edit and admin, billing into neither", () => {
    const roles = find<Role & { metadata: { labels: Record<string, string> } }>(
      helmTemplate("media-orchestrator-crds", "media-system", ["--set", "crds.only=true"]),
      "ClusterRole",
    );
    const agg = (r: (typeof roles)[number]) =>
      Object.keys(r.metadata.labels)
        .filter((l) => l.startsWith("rbac.authorization.k8s.io/aggregate-to-"))
        .map((l) => l.replace("rbac.authorization.k8s.io/aggregate-to-", ""))
        .sort();
    const byName = Object.fromEntries(roles.map((r) => [r.metadata.name, r]));
    expect(Object.keys(byName).sort()).toEqual([
      "media-orchestrator-billing-view",
      "media-orchestrator-edit",
      "media-orchestrator-view",
    ]);
    expect(agg(byName["media-orchestrator-view"]!)).toEqual(["admin", "edit", "view"]);
    expect(byName["media-orchestrator-view"]!.rules).toEqual([
      {
        apiGroups: ["media-orchestrator.io"],
        resources: ["mediajobs", "mediajobs/status", "gpuendpoints", "gpuendpoints/status"],
        verbs: ["get", "list", "watch"],
      },
    ]);
    // Every customer's plan, usage and payments: an operator's role, aggregated into nothing.
    expect(agg(byName["media-orchestrator-billing-view"]!)).toEqual([]);
    expect(byName["media-orchestrator-billing-view"]!.rules).toEqual([
      {
        apiGroups: ["media-orchestrator.io"],
        resources: ["billingaccounts", "billingaccounts/status", "paymentevents", "paymentevents/status"],
        verbs: ["get", "list", "watch"],
      },
    ]);
    expect(agg(byName["media-orchestrator-edit"]!)).toEqual(["admin", "edit"]);
    expect(byName["media-orchestrator-edit"]!.rules).toEqual([
      {
        apiGroups: ["media-orchestrator.io"],
        resources: ["mediajobs"],
        verbs: ["create", "update", "patch", "delete", "deletecollection"],
      },
    ]);
    const off = helmTemplate("c", "media-system", [
      "--set",
      "crds.only=true",
      "--set",
      "rbac.aggregateClusterRoles=false",
    ]);
    expect(find(off, "ClusterRole")).toEqual([]);
  });

  it("rbac.create=false renders no RBAC at all (the cluster's tooling owns it)", () => {
    const objs = [
      ...renderEnv("prod", ["--set", "rbac.create=false"]),
      ...helmTemplate("c", "media-system", ["--set", "crds.only=true", "--set", "rbac.create=false"]),
    ];
    expect(objs.filter((o) => o.apiVersion.startsWith("rbac.authorization.k8s.io"))).toEqual([]);
  });

  it("a helm test pod checks /readyz of both containers through the Service", () => {
    const pod = one<Manifest & { spec: { containers: Container[] } }>(renderEnv("prod"), "Pod");
    expect(pod.metadata.annotations?.["helm.sh/hook"]).toBe("test");
    expect(literalEnv(pod.spec.containers[0]!).READYZ_URLS).toBe(
      "http://mo-prod-media-orchestrator.media-prod.svc:8080/readyz http://mo-prod-media-orchestrator.media-prod.svc:8081/readyz",
    );
  });
});

describe("bad values are refused by install and lint alike, with a message naming the value", () => {
  it.each([
    [["--set", "replicaCount=0"], "/replicaCount"],
    [["--set", "environment=Prod"], "/environment"],
    [["--set", "endpointPrefix=my_prefix"], "/endpointPrefix"],
    [["--set", "gpuProvider.apiUrl=ftp://gpu.example.com"], "/gpuProvider/apiUrl"],
    [["--set", "callback.baseUrl=not-a-url"], "/callback/baseUrl"],
    [["--set", "logLevel=verbose"], "/logLevel"],
    [["--set", "gpuEndpoints.asr.minWorkers=-1"], "/gpuEndpoints/asr/minWorkers"],
    [["--set", "gpuEndpoints.tts.maxWorkers=many"], "/gpuEndpoints/tts/maxWorkers"],
    [["--set", "resyncIntervalSeconds=0"], "/resyncIntervalSeconds"],
    [["--set", "gpuEndpoint.enabled=true"], "'gpuEndpoint' not allowed"],
    [["--set", "image.pullPolicy=Sometimes"], "/image/pullPolicy"],
    [["--set", "gpuEndpoints.render.minWorkers=3"], "gpuEndpoints.render.maxWorkers (1) must be at least"],
    [["--set", "watchAllNamespaces=true", "--set", "watchNamespace=media-dev"], "watchNamespace"],
    [
      ["--set", "secrets.existingSecret=creds", "--set", "secrets.gpuProviderApiKey=k"],
      "secrets.existingSecret",
    ],
    [["--set", "ingress.enabled=true"], "at '/ingress/host'"],
    [
      [
        "--set",
        "replicaCount=2",
        "--set",
        "podDisruptionBudget.enabled=true",
        "--set",
        "podDisruptionBudget.minAvailable=2",
      ],
      "podDisruptionBudget.minAvailable",
    ],
    [["--set", "crds.only=true", "--set", "crds.install=false"], "crds.only"],
    [["--set", "environment=staging"], "is plain HTTP"],
    [["--set", "image.digest=latest"], "/image/digest"],
    [["--set", "image.registry=https://ghcr.io"], "/image/registry"],
    [
      ["--set", "leaderElection.renewDeadlineSeconds=20"],
      "leaderElection.leaseDurationSeconds (15) must be greater",
    ],
    [
      ["--set", "leaderElection.retryPeriodSeconds=10"],
      "leaderElection.renewDeadlineSeconds (10) must be greater",
    ],
    [["--set", "leaderElection.enabled=false", "--set", "replicaCount=2"], "leaderElection.enabled=false"],
    [
      ["--set", "callback.secret=a-0123456789abcdef0123456789abcdef", "--set", "callback.existingSecret=b"],
      "callback.existingSecret",
    ],
    [["--set", "callback.secret=short"], "/callback/secret"],
    [["--set", "callback.previousSecret=short"], "/callback/previousSecret"],
    [["--set", "podSecurityContext.runAsUsr=1000"], "/podSecurityContext"],
    [
      [
        "--set",
        "ingress.enabled=true",
        "--set",
        "ingress.host=h.example.com",
        "--set",
        "ingress.tls.enabled=true",
      ],
      "at '/webhooks/trustedProxies': minItems",
    ],
    [["--set", "webhooks.trustedProxies={0.0.0.0/0}"], "/webhooks/trustedProxies/0"],
    [["--set", "webhooks.trustedProxies={::/0}"], "/webhooks/trustedProxies/0"],
    [["--set", "webhooks.trustedProxies={ingress}"], "/webhooks/trustedProxies/0"],
    [["--set", "networkPolicy.enabled=true"], "at '/networkPolicy/egress/apiServer/cidrs': minItems"],
    [
      ["--set", "environment=prod", "--set", "callback.baseUrl=https://h.example.com"],
      "at '/image/digest': minLength",
    ],
    [
      ["--set", "environment=production", "--set", "callback.baseUrl=https://h.example.com"],
      "at '/image/digest': minLength",
    ],
    [["--set", "unconfirmedSubmissionPolicy=retry"], "/unconfirmedSubmissionPolicy"],
    [["--set", "probes.webhooks.liveness.periodSecond=1"], "/probes/webhooks/liveness"],
    [["--set", "networkPolicy.egress.providers.ports[0]=https"], "/networkPolicy/egress/providers/ports/0"],
    [
      ["--set", "podDisruptionBudget.unhealthyPodEvictionPolicy=Never"],
      "/podDisruptionBudget/unhealthyPodEvictionPolicy",
    ],
  ])("%j", (args, message) => {
    const res = helm([
      "template",
      "mo-dev",
      CHART_DIR,
      "-n",
      "media-dev",
      "-f",
      valuesFile("values-dev.yaml"),
      ...args,
    ]);
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain(message);
    expect(res.stdout).toBe("");
    // What install refuses, helm lint refuses too (not as an [INFO] line that still passes).
    const lint = helm(["lint", CHART_DIR, "--strict", "-f", valuesFile("values-dev.yaml"), ...args]);
    expect(lint.status).not.toBe(0);
    expect(lint.stdout + lint.stderr).toContain(message);
    expect(lint.stdout + lint.stderr).toContain("1 chart(s) failed");
  });
});
