import { defineConfig } from "vitest/config";

// One real control plane per run (test/setup/global.ts); each test file gets its own namespace
// (createTestNamespace in test/support/kube.ts). Two cores: at most two files at a time.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/setup/global.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    teardownTimeout: 30_000,
    reporters: ["default"],
  },
});
