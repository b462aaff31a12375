import { defineConfig } from "vitest/config";

// Pure tests: no control plane, no global setup. Each file here runs the product's logic in process,
// at most against the provider simulator over loopback HTTP; a file that needs the control plane
// (test/support/kube.ts, test/support/stack.ts) belongs only to vitest.config.ts.
export default defineConfig({
  test: {
    include: [
      "test/unit/**/*.test.ts",
      "test/cli/units.test.ts",
      "test/cli/provider-errors.test.ts",
      "test/cli/devstack-env.test.ts",
      "test/cli/prereqs.test.ts",
      "test/cli/demo-view.test.ts",
      "test/cli/colour.test.ts",
      "test/docs/**/*.test.ts",
      "test/provider/check-key.test.ts",
      "test/provider/client.test.ts",
      "test/provider/errors.test.ts",
      "test/provider/exactly-once.test.ts",
      "test/provider/health.test.ts",
      "test/provider/management-config.test.ts",
      "test/provider/retry.test.ts",
      "test/provider/self-hosted.test.ts",
      "test/simulator/**/*.test.ts",
      "test/sdk/js-sdk.test.ts",
      "test/webhooks/ratelimit.test.ts",
      "test/webhooks/signature.test.ts",
      "test/helm/image.test.ts",
      "test/storage/config.test.ts",
      "test/storage/attempt-io.test.ts",
      "test/storage/output-check.test.ts",
      "test/storage/kept-outputs.test.ts",
      "test/storage/lazy-signer.test.ts",
    ],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
  },
});
