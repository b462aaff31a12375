// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";

const OUTSIDE_THE_PRODUCT = {
  group: ["**/tools/**", "**/test/**", "**/bench/**", "**/scripts/**"],
  message: "the product (src/) imports nothing outside src/",
};

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", ".local/**", "test/controlplane/**", "deploy/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-console": ["error", { allow: ["error"] }],
      eqeqeq: ["error", "smart"],
    },
  },
  // Layers point one way. The product (src/) imports nothing of the tools, tests, benchmarks or
  // scripts: tsc would compile such a module into dist/ and the image would carry it.
  {
    files: ["src/**"],
    rules: { "no-restricted-imports": ["error", { patterns: [OUTSIDE_THE_PRODUCT] }] },
  },
  // Configuration is read by every process, the CLI included: it loads no piece of the sidecar,
  // the controller or the CLI.
  {
    files: ["src/config/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            OUTSIDE_THE_PRODUCT,
            {
              group: ["**/webhooks/**", "**/controller/**", "**/cli/**"],
              message: "configuration loads no piece of the processes that read it",
            },
          ],
        },
      ],
    },
  },
  // The runtime (informers, work queues, leader election, health, caches) knows no resource: the
  // loops (src/controller) declare what to watch and reconcile, and the runtime runs them.
  {
    files: ["src/runtime/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            OUTSIDE_THE_PRODUCT,
            {
              group: [
                "**/crds/**",
                "**/mediajob/**",
                "**/gpuendpoint/**",
                "**/billing/**",
                "**/controller/**",
                "**/webhooks/**",
                "**/cli/**",
                "**/callback/**",
                "**/provider/**",
                "**/config/**",
              ],
              message:
                "the runtime knows no resource and no product module: a loop's setup hands it what it needs",
            },
          ],
        },
      ],
    },
  },
  // The domain decides and does no I/O: the controller's and the sidecar's edges read the world,
  // call the domain's pure functions and write what they return. The provider's response schemas
  // (provider/schemas.ts) are data, not a client.
  {
    files: ["src/mediajob/**", "src/billing/**", "src/gpuendpoint/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          paths: [
            { name: "@kubernetes/client-node", message: "the domain does no I/O" },
            { name: "undici", message: "the domain does no I/O" },
            { name: "fastify", message: "the domain does no I/O" },
          ],
          patterns: [
            OUTSIDE_THE_PRODUCT,
            {
              group: [
                "**/k8s/**",
                "**/http/**",
                "**/provider/**",
                "!**/provider/schemas.js",
                "**/config/**",
                "**/controller/**",
                "**/runtime/**",
                "**/webhooks/**",
                "**/cli/**",
                "node:http",
                "node:https",
                "node:net",
                "node:fs",
                "node:fs/promises",
              ],
              message:
                "the domain does no I/O: an edge (src/controller, src/webhooks, src/cli) reads and writes for it",
            },
          ],
        },
      ],
    },
  },
  {
    files: [
      "src/cli/**",
      "scripts/**",
      "bench/**",
      "src/**/main.ts",
      "tools/**/main.ts",
      "src/crds/generate.ts",
    ],
    rules: { "no-console": "off" },
  },
);
