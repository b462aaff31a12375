// The Helm chart, offline: `helm lint` and `helm template` for every values file, with the real
// helm (built from its Go module by test/support/helm.ts). Renders are parsed and checked for
// what users rely on: the objects of each environment, the pod's security and probes, the
// configuration the product actually reads, RBAC exactly as documented, secrets, and clear
// failures on bad values.
import { beforeAll, describe, expect, it } from "vitest";
import { EnvSchema, parseEnv } from "../../src/config/env.js";
import {
  CHART_DIR,
  EXPECTED_RULES,
  expectedLeaseRules,
  helm,
  helmBinary,
  helmTemplate,
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
type Binding = Manifest & {
  roleRef: { kind: string; name: string };
  subjects: Array<{ kind: string; name: string; namespace: string }>;
};

const ENVIRONMENTS = ["dev", "staging", "prod"] as const;
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

/** Renders an environment the way docs/helm.md installs it. */
const renderEnv = (env: string, args: string[] = []) =>
  helmTemplate(`mo-${env}`, `media-${env}`, ["-f", valuesFile(`values-${env}.yaml`), ...args]);

beforeAll(() => {
  helmBinary();
}, 15 * 60_000);

describe("helm lint", () => {
  it.each(["values.yaml", "values-dev.yaml", "values-staging.yaml", "values-prod.yaml"])(
    "passes --strict with %s",
    (file) => {
      const res = helm(["lint", CHART_DIR, "--strict", "-f", valuesFile(file)]);
      expect(res.stdout + res.stderr).toContain("1 chart(s) linted, 0 chart(s) failed");
      expect(res.status).toBe(0);
    },
  );

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
      ...(replicas > 1 ? ["PodDisruptionBudget"] : []),
    ].sort();
    expect(kinds(objs)).toEqual(expected);
    for (const o of objs) {
      if (o.kind !== "GpuEndpoint") expect(o.metadata.namespace, `${o.kind} namespace`).toBe(ns);
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
    expect(new Set(pod.containers.map((c) => c.image))).toEqual(new Set(["media-orchestrator:0.1.0"]));
    if (replicas > 1) {
      const pdb = one<Manifest & { spec: Record<string, unknown> }>(objs, "PodDisruptionBudget");
      expect(pdb.spec).toMatchObject({ minAvailable: 1 });
      expect(pod.affinity).toBeDefined(); // spread over nodes
    }
  });

  it("runs restricted: non-root, read-only root file system, no escalation, no capabilities", () => {
    const pod = deployment.spec.template.spec;
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(pod.securityContext.runAsUser).not.toBe(0);
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
    // POD_NAMESPACE is read by the sidecar directly (src/webhooks/server.ts webhookNamespace).
    const known = new Set([...Object.keys(EnvSchema.shape), "POD_NAMESPACE"]);
    for (const c of deployment.spec.template.spec.containers) {
      for (const e of c.env)
        expect(known.has(e.name), `${c.name}: ${e.name} is not read by the product`).toBe(true);
      const vars = envOf(c);
      expect(vars.get("WATCH_NAMESPACE")?.value).toBe(ns);
      expect(vars.get("LEADER_ELECTION")?.value).toBe("true");
      expect(vars.get("LEADER_ELECTION_NAMESPACE")?.value).toBe(ns);
      expect(vars.get("LEADER_ELECTION_ID")?.value).toBe(`mo-${env}-media-orchestrator`);
      expect(vars.get("MEDIA_ENV")?.value).toBe(env);
      expect(vars.get("POD_NAME")?.valueFrom?.fieldRef?.fieldPath).toBe("metadata.name");
      expect(vars.get("POD_NAMESPACE")?.valueFrom?.fieldRef?.fieldPath).toBe("metadata.namespace");
      for (const key of ["GPU_PROVIDER_API_KEY", "PAYMENT_PROVIDER_WEBHOOK_SECRET", "CALLBACK_SECRET"])
        expect(vars.get(key)?.valueFrom?.secretKeyRef).toMatchObject({
          name: `mo-${env}-media-orchestrator`,
          key,
        });
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
        CALLBACK_BASE_URL: `http://mo-${env}-media-orchestrator.${ns}.svc:8080`,
      });
    }
  });

  it("grants exactly the documented RBAC, in the release namespace only", () => {
    const fullname = `mo-${env}-media-orchestrator`;
    expect(find(objs, "ClusterRole")).toEqual([]);
    expect(find(objs, "ClusterRoleBinding")).toEqual([]);
    expect(one<Role>(objs, "Role", fullname).rules).toEqual(EXPECTED_RULES);
    expect(one<Role>(objs, "Role", `${fullname}-leader-election`).rules).toEqual(
      expectedLeaseRules(fullname),
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
    const role = one<Role>(objs, "ClusterRole");
    expect(role.metadata.name).toBe("media-all-mo-media-orchestrator");
    expect(role.rules).toEqual(EXPECTED_RULES);
    const binding = one<Binding>(objs, "ClusterRoleBinding");
    expect(binding.roleRef).toMatchObject({ kind: "ClusterRole", name: role.metadata.name });
    expect(binding.subjects).toEqual([
      { kind: "ServiceAccount", name: "mo-media-orchestrator", namespace: "media-all" },
    ]);
    // The Lease stays namespaced.
    expect(find<Role>(objs, "Role").map((r) => [r.metadata.name, r.metadata.namespace, r.rules])).toEqual([
      ["mo-media-orchestrator-leader-election", "media-all", expectedLeaseRules("mo-media-orchestrator")],
    ]);
    const controller = one<Deployment>(objs, "Deployment").spec.template.spec.containers[0]!;
    expect(envOf(controller).get("WATCH_NAMESPACE")?.value).toBe("");
    expect(find(objs, "GpuEndpoint").map((e) => e.metadata.namespace)).toEqual([
      "media-all",
      "media-all",
      "media-all",
    ]);
  });

  it("watchNamespace: the Role and the GpuEndpoints go to that namespace, the Lease stays home", () => {
    const objs = helmTemplate("mo", "media-ops", [
      "--set",
      "watchNamespace=media-jobs",
      "--set",
      "gpuEndpoints.enabled=true",
    ]);
    expect(one<Role>(objs, "Role", "mo-media-orchestrator").metadata.namespace).toBe("media-jobs");
    expect(one<Binding>(objs, "RoleBinding", "mo-media-orchestrator").metadata.namespace).toBe("media-jobs");
    expect(one<Role>(objs, "Role", "mo-media-orchestrator-leader-election").metadata.namespace).toBe(
      "media-ops",
    );
    expect(new Set(find(objs, "GpuEndpoint").map((e) => e.metadata.namespace))).toEqual(
      new Set(["media-jobs"]),
    );
    const env = envOf(one<Deployment>(objs, "Deployment").spec.template.spec.containers[0]!);
    expect(env.get("WATCH_NAMESPACE")?.value).toBe("media-jobs");
    expect(env.get("LEADER_ELECTION_NAMESPACE")?.value).toBe("media-ops");
  });

  it("the CRD release renders the four CRDs only, kept on uninstall", () => {
    const objs = helmTemplate("media-orchestrator-crds", "media-system", ["--set", "crds.only=true"]);
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
    for (const crd of unkept) expect(crd.metadata.annotations?.["helm.sh/resource-policy"]).toBeUndefined();
  });

  it("the default values install the CRDs with the operator (a single all-in-one release)", () => {
    const objs = helmTemplate("mo", "media", []);
    expect(find(objs, "CustomResourceDefinition")).toHaveLength(4);
    expect(find(objs, "Deployment")).toHaveLength(1);
    expect(find(objs, "GpuEndpoint")).toHaveLength(0);
  });

  it("generates the callback secret when none is given; takes the one given", () => {
    const secretOf = (objs: Manifest[]) => {
      const s = one<Manifest & { data: Record<string, string> }>(objs, "Secret");
      return Object.fromEntries(
        Object.entries(s.data).map(([k, v]) => [k, Buffer.from(v, "base64").toString()]),
      );
    };
    const a = secretOf(renderEnv("dev"));
    const b = secretOf(renderEnv("dev"));
    expect(Object.keys(a)).toEqual(["CALLBACK_SECRET"]);
    expect(a.CALLBACK_SECRET).toMatch(/^[A-Za-z0-9]{48}$/);
    expect(b.CALLBACK_SECRET).not.toBe(a.CALLBACK_SECRET); // offline: nothing to keep (helm upgrade keeps it)
    const given = secretOf(
      renderEnv("dev", [
        "--set",
        "callback.secret=cb-1",
        "--set",
        "secrets.gpuProviderApiKey=gpu-1",
        "--set",
        "secrets.paymentProviderWebhookSecret=whsec_a\\,whsec_b",
      ]),
    );
    expect(given).toEqual({
      CALLBACK_SECRET: "cb-1",
      GPU_PROVIDER_API_KEY: "gpu-1",
      PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_a,whsec_b",
    });
  });

  it("an existing Secret supplies every credential and the chart creates none", () => {
    const objs = renderEnv("prod", ["--set", "secrets.existingSecret=media-credentials"]);
    expect(find(objs, "Secret")).toEqual([]);
    const deployment = one<Deployment>(objs, "Deployment");
    expect(deployment.spec.template.metadata.annotations?.["checksum/secret"]).toBeUndefined();
    for (const c of deployment.spec.template.spec.containers) {
      const refs = c.env.filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.valueFrom!.secretKeyRef!);
      expect(refs.map((r) => [r.name, r.key, r.optional])).toEqual([
        ["media-credentials", "GPU_PROVIDER_API_KEY", true],
        ["media-credentials", "PAYMENT_PROVIDER_API_KEY", true],
        ["media-credentials", "PAYMENT_PROVIDER_WEBHOOK_SECRET", true],
        ["media-credentials", "CALLBACK_SECRET", false],
      ]);
    }
  });

  it("a credential change rolls the pods; a render without one does not", () => {
    const checksum = (args: string[]) =>
      one<Deployment>(renderEnv("dev", args), "Deployment").spec.template.metadata.annotations?.[
        "checksum/secret"
      ];
    expect(checksum([])).toBe(checksum([]));
    expect(checksum(["--set", "secrets.gpuProviderApiKey=a"])).not.toBe(
      checksum(["--set", "secrets.gpuProviderApiKey=b"]),
    );
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

describe("bad values are refused with a message naming the value", () => {
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
    [["--set", "ingress.enabled=true"], "ingress.host is required"],
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
  });
});
