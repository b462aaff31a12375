// How the product reaches the apiserver, measured through a TCP proxy in front of the real control
// plane: how many connections its calls open, and what a call does when the apiserver stops
// answering.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { KubeApi } from "../../src/k8s/api.js";
import { describeError, isTimeout } from "../../src/k8s/errors.js";
import { KubeTimeoutError } from "../../src/k8s/transport.js";
import { watchWithInactivityLimit } from "../../src/k8s/watch.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { TcpProxy } from "./tcp-proxy.js";

const kc = testKubeConfig();
let proxy: TcpProxy;

/** The test kubeconfig, pointed at the proxy (same credentials and TLS settings). */
function viaProxy(): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: kc.getClusters().map((c) => ({ ...c, server: proxy.url })),
    users: kc.getUsers(),
    contexts: kc.getContexts(),
    currentContext: kc.getCurrentContext(),
  });
  return copy;
}

async function times(n: number, concurrency: number, call: () => Promise<unknown>): Promise<void> {
  let left = n;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left-- > 0) await call();
    }),
  );
}

beforeAll(async () => {
  proxy = await TcpProxy.start(kc.getCurrentCluster()!.server);
});
afterAll(async () => {
  await proxy?.close();
});

describe("connections to the apiserver", () => {
  beforeEach(() => {
    proxy.connections = 0;
  });

  // When this fails, client-node pools connections itself and withConnectionReuse can go.
  it("client-node alone opens a new connection for every call", async () => {
    const core = viaProxy().makeApiClient(CoreV1Api);
    await times(20, 1, () => core.readNamespace({ name: "default" }));
    expect(proxy.connections).toBe(20);
  });

  it("the product's client keeps a few connections for 200 calls of every kind", async () => {
    const api = new KubeApi(viaProxy());
    // The typed clients (client-node's path, pooled by withConnectionReuse).
    const { core } = await api.typed();
    await times(200, 1, () => core.readNamespace({ name: "default" }));
    // Sequential calls share one connection; a second may replace one the server closed.
    expect(proxy.connections).toBeLessThanOrEqual(2);
    // Every call of KubeApi's own (src/k8s/http.ts): a call that starts the moment the previous
    // answer was read may find that connection not yet back in the pool and open a second one.
    proxy.connections = 0;
    await times(200, 1, () => api.get("mediajobs", "default", "absent"));
    await times(200, 1, () => api.rawJson("GET", "/api/v1/namespaces/default"));
    await times(200, 1, () => api.mergePatch("mediajobs", "default", "absent", {}).catch(() => {}));
    expect(proxy.connections).toBeLessThanOrEqual(2);

    // Eight callers at a time: the pool grows to what the load needs (a connection is free a
    // moment after its answer is read, so it may hold more than eight), then serves from it.
    await times(200, 8, () => api.get("mediajobs", "default", "absent"));
    proxy.connections = 0;
    await times(200, 8, () => api.get("mediajobs", "default", "absent"));
    expect(proxy.connections).toBeLessThanOrEqual(2);
  });
});

describe("deadlines", () => {
  it("a call to an apiserver that stops answering fails at its deadline; the client recovers", async () => {
    const api = new KubeApi(viaProxy(), { timeoutMs: 1_000 });
    await api.get("mediajobs", "default", "absent"); // a pooled connection, then silence on it
    proxy.stall();
    try {
      const started = Date.now();
      const typed = await api.get("mediajobs", "default", "absent").catch((e: unknown) => e);
      expect(typed).toBeInstanceOf(KubeTimeoutError);
      expect(typed).toMatchObject({ method: "GET", timeoutMs: 1_000 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(990);
      expect(isTimeout(typed)).toBe(true);
      expect(describeError(typed)).toMatch(
        /^GET \/apis\/.*\/mediajobs\/absent: no complete answer .* 1000 ms$/,
      );

      // New connections stall too (in the TLS handshake); every kind of call has a deadline.
      await expect((await api.typed()).core.readNamespace({ name: "default" })).rejects.toBeInstanceOf(
        KubeTimeoutError,
      );
      await expect(api.list("mediajobs", "default")).rejects.toBeInstanceOf(KubeTimeoutError);
      await expect(api.mergePatch("mediajobs", "default", "absent", {})).rejects.toBeInstanceOf(
        KubeTimeoutError,
      );

      // A call's own deadline, shorter than the client's (a lease renewal's).
      const raw = await api
        .rawJson("PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/x", {}, undefined, {
          timeoutMs: 200,
        })
        .catch((e: unknown) => e);
      expect(raw).toMatchObject({ name: "KubeTimeoutError", method: "PUT", timeoutMs: 200 });

      // The caller's signal ends a call early, with the caller's reason.
      const shutdown = new AbortController();
      const pending = api.get("mediajobs", "default", "absent", { signal: shutdown.signal });
      shutdown.abort(new Error("shutting down"));
      await expect(pending).rejects.toThrow("shutting down");
    } finally {
      proxy.resume();
    }
    // A call that hit its deadline closed its connection. A connection the pool opened during
    // the stall (still silent) can cost one more call its deadline; then calls go through.
    let failures = 0;
    await eventually(() => api.get("mediajobs", "default", "absent").then((v) => v === undefined), {
      timeoutMs: 10_000,
      intervalMs: 0,
      message: () => `no call succeeded after the stall (${++failures} probes)`,
    });
  });
});

describe("watches", () => {
  // client-node cuts a watch that received nothing for 30 s; an idle watch gets its first
  // bookmark only near its timeoutSeconds, so the window must be the informer's own.
  it("end after the caller's inactivity window, not the library's 30 s", async () => {
    const started = Date.now();
    const ended = await new Promise<unknown>((resolve, reject) => {
      watchWithInactivityLimit(kc, 1_000)
        .watch(
          "/api/v1/namespaces/default/configmaps",
          { fieldSelector: "metadata.name=absent", timeoutSeconds: 60 },
          () => {},
          resolve,
        )
        .catch(reject);
    });
    expect(isTimeout(ended)).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});
