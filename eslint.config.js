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
  // The GpuEndpoint domain decides and does no I/O: the controller's executor
  // (src/controller/gpuendpoint) reads the provider and Kubernetes for it and carries out its plan.
  {
    files: ["src/gpuendpoint/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          paths: [
            { name: "@kubernetes/client-node", message: "the domain does no I/O" },
            { name: "undici", message: "the domain does no I/O" },
          ],
          patterns: [
            OUTSIDE_THE_PRODUCT,
            {
              group: [
                "**/k8s/**",
                "**/http/**",
                "**/provider/**",
                "**/config/**",
                "**/controller/**",
                "**/webhooks/**",
                "**/cli/**",
                "node:*",
              ],
              message: "the domain does no I/O: src/controller/gpuendpoint reads and writes for it",
            },
          ],
        },
      ],
    },
  },
);
