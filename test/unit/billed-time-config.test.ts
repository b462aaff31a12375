// `executionAndDelay` bills each job its queue wait (RunPod's delayTime), which is not worker time
// the provider bills and grows with other customers' jobs on the same endpoint: the controller
// refuses to start with it unless USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED says it is meant.
import { describe, expect, it } from "vitest";
import { ConfigError, parseEnv } from "../../src/config/env.js";
import { usageSettings } from "../../src/config/usage.js";

describe("USAGE_BILLED_TIME=executionAndDelay", () => {
  it("is refused at load without the acknowledgement, with a message that says why and what to set", () => {
    const env = parseEnv({ USAGE_BILLED_TIME: "executionAndDelay" });
    expect(() => usageSettings(env)).toThrow(ConfigError);
    expect(() => usageSettings(env)).toThrow(
      /queue wait.*other customers.*USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED=true/,
    );
  });

  it("starts when acknowledged, and the default rule needs nothing", () => {
    const acknowledged = parseEnv({
      USAGE_BILLED_TIME: "executionAndDelay",
      USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED: "true",
    });
    expect(usageSettings(acknowledged).rule.billedTime).toBe("executionAndDelay");
    expect(usageSettings(parseEnv({})).rule.billedTime).toBe("execution");
    expect(parseEnv({}).USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED).toBe(false);
  });

  it("the sidecar, which bills nothing itself, does not refuse it", () => {
    const env = parseEnv({ USAGE_BILLED_TIME: "executionAndDelay" });
    expect(usageSettings(env, { sidecar: true }).rule.billedTime).toBe("executionAndDelay");
  });
});
