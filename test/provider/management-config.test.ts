// The management settings: REST v2 by default, GraphQL on request, and hosts that work against
// RunPod without being set (job API on api.runpod.ai, management on api.runpod.io).
import { describe, expect, it } from "vitest";
import { ConfigError, managementUrl, parseEnv } from "../../src/config/env.js";

describe("management configuration", () => {
  it("defaults to REST v2 on RunPod's management host", () => {
    const env = parseEnv({});
    expect(env.GPU_PROVIDER_MANAGEMENT_API).toBe("rest");
    expect(env.GPU_PROVIDER_API_URL).toBe("https://api.runpod.ai");
    expect(managementUrl(env)).toBe("https://api.runpod.io");
  });

  it("a custom job API (a simulator, a proxy) serves management too unless told otherwise", () => {
    expect(managementUrl(parseEnv({ GPU_PROVIDER_API_URL: "http://127.0.0.1:8000/" }))).toBe(
      "http://127.0.0.1:8000",
    );
    expect(
      managementUrl(
        parseEnv({
          GPU_PROVIDER_API_URL: "http://127.0.0.1:8000",
          GPU_PROVIDER_MANAGEMENT_URL: "https://m.example",
        }),
      ),
    ).toBe("https://m.example");
  });

  it("GPU_PROVIDER_MANAGEMENT_API takes rest or graphql, nothing else", () => {
    expect(parseEnv({ GPU_PROVIDER_MANAGEMENT_API: "graphql" }).GPU_PROVIDER_MANAGEMENT_API).toBe("graphql");
    expect(() => parseEnv({ GPU_PROVIDER_MANAGEMENT_API: "soap" })).toThrow(ConfigError);
  });
});
