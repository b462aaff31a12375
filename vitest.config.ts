import { defineConfig } from "vitest/config";

// One real control plane per run (test/setup/global.ts); each test file gets its own namespaces
// (createTestNamespace in test/support/kube.ts), removed after the file (test/setup/namespaces.ts). Two cores: at most two files at a time.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/setup/global.ts"],
    // Removes the namespaces each file created, after the file's own afterAll hooks.
    setupFiles: ["test/setup/namespaces.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    teardownTimeout: 30_000,
    reporters: ["default"],
  },
});
