// Secrets mounted as files (the chart mounts each container's Secret keys under SECRETS_DIR): read
// at start, and re-read while the process runs, so a rotated secret takes effect without a
// restart. The sidecar runs as a process (`media-orchestrator webhooks`), its secrets in a
// directory laid out as the kubelet lays out a Secret volume (files that are symlinks into a
// `..data` directory, swapped in one rename on a change); the payment signing secret is rotated
// there and the next delivery signed with the new secret is accepted, the old one refused. The
// controller, as a process too, starts with a revoked GPU key and takes the new one from its file.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { ConfigError, parseEnv, watchEnvSecretFiles } from "../../src/config/env.js";
import { rebuiltOnChange } from "../../src/config/secret-files.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import { KubeApi } from "../../src/k8s/api.js";
import { createTestNamespace, eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { deliverPaymentEvent, subscriptionCreated } from "../support/payments.js";
import { condition, gpuEndpoint, startTestSimulator } from "../support/stack.js";

/** A Secret volume as the kubelet writes it: <dir>/<key> -> ..data/<key>, ..data -> ..<timestamp>. */
function secretVolume(): { dir: string; write: (data: Record<string, string>) => void } {
  const dir = mkdtempSync(join(tmpdir(), "mo-secret-volume-"));
  let n = 0;
  const write = (data: Record<string, string>) => {
    const version = `..${Date.now()}_${n++}`;
    mkdirSync(join(dir, version));
    for (const [k, v] of Object.entries(data)) writeFileSync(join(dir, version, k), v);
    symlinkSync(version, join(dir, "..data_tmp"));
    renameSync(join(dir, "..data_tmp"), join(dir, "..data")); // the atomic swap
    for (const k of Object.keys(data)) {
      try {
        symlinkSync(join("..data", k), join(dir, k));
      } catch {
        // exists from an earlier version: it already points through ..data
      }
    }
  };
  return { dir, write };
}

/** `media-orchestrator <mode>` with only these variables (no secret among them). */
function startProcess(mode: string, env: Record<string, string>) {
  const child = spawn("node_modules/.bin/tsx", ["src/main.ts", mode], {
    cwd: process.cwd(),
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      KUBECONFIG: testKubeconfigPath(),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise((r) => child.on("exit", r));
  running.add(() => child.kill("SIGTERM"));
  return { child, exited, stderr: () => stderr };
}

const running = new Set<() => void>();
afterEach(() => {
  for (const kill of running) kill();
  running.clear();
});

describe("secrets from files", () => {
  it("reads SECRETS_DIR and <VARIABLE>_FILE; an environment variable beside its file is refused", () => {
    const vol = secretVolume();
    vol.write({ GPU_PROVIDER_API_KEY: "gpu-from-file\n", CALLBACK_SECRET: "c".repeat(40) });
    const other = join(mkdtempSync(join(tmpdir(), "mo-secret-file-")), "whsec");
    writeFileSync(other, "whsec_from_file\n");
    const env = parseEnv({ SECRETS_DIR: vol.dir, PAYMENT_PROVIDER_WEBHOOK_SECRET_FILE: other });
    expect(env).toMatchObject({
      GPU_PROVIDER_API_KEY: "gpu-from-file",
      CALLBACK_SECRET: "c".repeat(40),
      PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_from_file",
    });
    // A variable the directory does not hold is left to the environment.
    expect(parseEnv({ SECRETS_DIR: vol.dir, PAYMENT_PROVIDER_API_KEY: "sk" }).PAYMENT_PROVIDER_API_KEY).toBe(
      "sk",
    );
    expect(() =>
      parseEnv({ PAYMENT_PROVIDER_WEBHOOK_SECRET: "x", PAYMENT_PROVIDER_WEBHOOK_SECRET_FILE: other }),
    ).toThrow("both PAYMENT_PROVIDER_WEBHOOK_SECRET and PAYMENT_PROVIDER_WEBHOOK_SECRET_FILE are set");
    // A missing file names the variable, never a value.
    const missing = () => parseEnv({ GPU_PROVIDER_API_KEY_FILE: "/nonexistent/key" });
    expect(missing).toThrow(ConfigError);
    expect(missing).toThrow("GPU_PROVIDER_API_KEY: cannot read its file (ENOENT)");
  });

  it("an empty or invalid file keeps the value in use, logged once by variable name, never a value", () => {
    const vol = secretVolume();
    vol.write({ GPU_PROVIDER_API_KEY: "gpu-1", LOG_LEVEL: "info" });
    const lines: string[] = [];
    const log = pino({ level: "info" }, { write: (l: string) => lines.push(l) });
    const env = parseEnv({ SECRETS_DIR: vol.dir });
    const watch = watchEnvSecretFiles(env, log);
    try {
      vol.write({ GPU_PROVIDER_API_KEY: "gpu-2", LOG_LEVEL: "info" });
      expect(watch.check()).toEqual(["GPU_PROVIDER_API_KEY"]);
      expect(env.GPU_PROVIDER_API_KEY).toBe("gpu-2");
      // Emptied (a half-done edit), then a value parseEnv refuses: the value in use stays.
      vol.write({ GPU_PROVIDER_API_KEY: "", LOG_LEVEL: "info" });
      expect(watch.check()).toEqual([]);
      expect(watch.check()).toEqual([]);
      vol.write({ GPU_PROVIDER_API_KEY: "gpu-3", LOG_LEVEL: "chatty" });
      expect(watch.check()).toEqual(["GPU_PROVIDER_API_KEY"]);
      expect(env).toMatchObject({ GPU_PROVIDER_API_KEY: "gpu-3", LOG_LEVEL: "info" });
      const errors = lines.map(
        (l) => JSON.parse(l) as { level: number; variable?: string; problem?: string },
      );
      expect(errors.filter((e) => e.level >= 50).map((e) => [e.variable, e.problem])).toEqual([
        ["GPU_PROVIDER_API_KEY", "empty"],
        ["LOG_LEVEL", expect.stringContaining("Invalid option")],
      ]);
      for (const secret of ["gpu-1", "gpu-2", "gpu-3", "chatty"])
        expect(lines.join("")).not.toContain(secret);
    } finally {
      watch.stop();
    }
  });

  it("a callback key rotation without a restart: the previous key's file, absent at start, is read when it appears", () => {
    // The rotation docs/helm.md describes: CALLBACK_SECRET becomes the new key and the old one is
    // kept as CALLBACK_SECRET_PREVIOUS, a key the Secret did not hold when the process started.
    const [oldKey, newKey] = ["o".repeat(40), "n".repeat(40)];
    const vol = secretVolume();
    vol.write({ CALLBACK_SECRET: oldKey });
    const lines: string[] = [];
    const env = parseEnv({ SECRETS_DIR: vol.dir });
    const watch = watchEnvSecretFiles(env, pino({ level: "info" }, { write: (l: string) => lines.push(l) }));
    try {
      expect(watch.check()).toEqual([]);
      expect(lines.filter((l) => l.includes("not usable"))).toEqual([]);
      vol.write({ CALLBACK_SECRET: newKey, CALLBACK_SECRET_PREVIOUS: oldKey });
      expect(watch.check().sort()).toEqual(["CALLBACK_SECRET", "CALLBACK_SECRET_PREVIOUS"]);
      expect(env).toMatchObject({ CALLBACK_SECRET: newKey, CALLBACK_SECRET_PREVIOUS: oldKey });
      // A key the processes refuse at start (under 32 bytes) is refused on a reload too.
      vol.write({ CALLBACK_SECRET: "short", CALLBACK_SECRET_PREVIOUS: oldKey });
      expect(watch.check()).toEqual([]);
      expect(env.CALLBACK_SECRET).toBe(newKey);
      expect(lines.join("")).not.toContain("short");
    } finally {
      watch.stop();
    }
  });

  it("a client built with a secret is rebuilt with the new value once it changes", () => {
    let key = "old";
    const built: string[] = [];
    const client = rebuiltOnChange(
      () => key,
      (k) => {
        built.push(k);
        return new (class {
          readonly #key = k;
          auth() {
            return `Bearer ${this.#key}`;
          }
        })();
      },
    );
    expect(client.auth()).toBe("Bearer old");
    key = "new";
    expect(client.auth()).toBe("Bearer new");
    expect(client.auth()).toBe("Bearer new");
    expect(built).toEqual(["old", "new"]);
  });
});

describe("the sidecar process with its secrets mounted as files", () => {
  let namespace: string;

  beforeAll(async () => {
    namespace = await createTestNamespace(testKubeConfig(), "secret-files");
  });

  it("takes a rotated payment signing secret without a restart", async () => {
    const first = `whsec_${randomBytes(12).toString("hex")}`;
    const second = `whsec_${randomBytes(12).toString("hex")}`;
    const vol = secretVolume();
    const secrets = {
      CALLBACK_SECRET: randomBytes(32).toString("hex"),
      GPU_PROVIDER_API_KEY: "sim-key",
      PAYMENT_PROVIDER_WEBHOOK_SECRET: first,
    };
    vol.write(secrets);
    // No secret in the environment: only the directory.
    const { child, exited, stderr } = startProcess("webhooks", {
      WATCH_NAMESPACE: namespace,
      LEADER_ELECTION: "false",
      WEBHOOKS_HOST: "127.0.0.1",
      WEBHOOKS_PORT: "0",
      SECRETS_DIR: vol.dir,
      SECRET_FILES_RELOAD_SECONDS: "1",
    });
    let url: string | undefined;
    const lines: string[] = [];
    for await (const line of createInterface({ input: child.stdout })) {
      lines.push(line);
      if (line.includes("webhooks sidecar started")) {
        url = (JSON.parse(line) as { url: string }).url;
        break;
      }
    }
    expect(url, stderr()).toBeDefined();

    const deliver = async (secret: string) =>
      (await deliverPaymentEvent(url!, subscriptionCreated("cus_rot", "sub_rot"), secret)).status;
    expect(await deliver(first)).toBe(200);
    expect(await deliver(second)).toBe(400);

    vol.write({ ...secrets, PAYMENT_PROVIDER_WEBHOOK_SECRET: second });
    await eventually(async () => (await deliver(second)) === 200, {
      timeoutMs: 15_000,
      message: "a delivery signed with the rotated secret to be accepted",
    });
    expect(await deliver(first)).toBe(400);
    // The same process all along, and no secret in what it logged.
    expect(child.exitCode).toBeNull();
    const logged = lines.join("\n") + stderr();
    for (const s of [first, second, secrets.CALLBACK_SECRET]) expect(logged).not.toContain(s);
    child.kill("SIGTERM");
    await exited;
  }, 60_000);
});

describe("the controller process with its GPU key mounted as a file", () => {
  it("takes a rotated GPU key without a restart: the provider refuses the old one, accepts the new", async () => {
    const namespace = await createTestNamespace(testKubeConfig(), "secret-files-gpu");
    const sim = await startTestSimulator({ apiKeys: ["gpu-key-new"] });
    const vol = secretVolume();
    const secrets = {
      GPU_PROVIDER_API_KEY: "gpu-key-revoked",
      CALLBACK_SECRET: randomBytes(32).toString("hex"),
    };
    vol.write(secrets);
    const api = new KubeApi(testKubeConfig());
    const controller = startProcess("controller", {
      WATCH_NAMESPACE: namespace,
      LEADER_ELECTION: "false",
      GPU_PROVIDER_API_URL: sim.url,
      MEDIA_ENV: "test",
      MEDIA_ENDPOINT_PREFIX: "media",
      CALLBACK_BASE_URL: "http://127.0.0.1:9",
      CONTROLLER_METRICS_PORT: "0",
      WEBHOOKS_HOST: "127.0.0.1",
      RESYNC_INTERVAL_SECONDS: "1",
      SECRETS_DIR: vol.dir,
      SECRET_FILES_RELOAD_SECONDS: "1",
    });
    try {
      await api.create(
        "gpuendpoints",
        namespace,
        gpuEndpoint("media-asr-test", {
          workload: "asr",
          minWorkers: 0,
          maxWorkers: 1,
          idleTimeoutSeconds: 5,
        }) as never,
      );
      const credentials = async () =>
        condition(
          await api.get<GpuEndpoint>("gpuendpoints", namespace, "media-asr-test"),
          "CredentialsValid",
        );
      await eventually(async () => (await credentials())?.reason === "InvalidApiKey", {
        timeoutMs: 30_000,
        message: () => `the revoked key to be refused (${controller.stderr()})`,
      });
      vol.write({ ...secrets, GPU_PROVIDER_API_KEY: "gpu-key-new" });
      await eventually(async () => (await credentials())?.status === "True", {
        timeoutMs: 30_000,
        message: "the rotated key to be accepted",
      });
      expect(controller.child.exitCode).toBeNull(); // the same process all along
    } finally {
      controller.child.kill("SIGTERM");
      await controller.exited;
      await sim.close();
    }
  }, 90_000);
});
