// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";

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
