// The Dockerfile cannot be built here (no Docker engine). What the image runs (compiled dist/ with
// production dependencies only, in both modes) is built and started by dist.test.ts; this checks
// that the Dockerfile builds it that way and agrees with the chart: the Node pin, the stages, the
// user, the ports, the entry point, the build context.
import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { RUNTIME_ENV, RUNTIME_FLAGS } from "../../bench/lib.js";
import { REPO_ROOT } from "../support/controlplane.js";

const read = (p: string) => readFileSync(join(REPO_ROOT, p), "utf8");
const dockerfile = read("Dockerfile");
const pkg = JSON.parse(read("package.json")) as {
  engines: { node: string };
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const values = parse(read("deploy/helm/values.yaml")) as { service: { port: number; metricsPort: number } };

describe("the image", () => {
  it("is built on the Node the tests run on: the Makefile's pin, an LTS that engines names", () => {
    const image = /^ARG NODE_IMAGE=node:(\d+)\.(\d+)\.(\d+)-bookworm-slim$/m.exec(dockerfile);
    const pinned = /^NODE_VERSION := (\d+)\.(\d+)\.(\d+)$/m.exec(read("Makefile"));
    expect(image?.slice(1)).toEqual(pinned?.slice(1));
    const [major, minor] = pinned!.slice(1).map(Number) as [number, number];
    // Only even majors become LTS (https://nodejs.org/en/about/previous-releases);
    // @kubernetes/client-node 2.x needs at least 22.19.
    expect(major % 2).toBe(0);
    expect(major > 22 || (major === 22 && minor >= 19)).toBe(true);
    expect(pkg.engines.node).toMatch(new RegExp(`^\\^${major}\\.`));
    expect(pkg.devDependencies["@types/node"]).toMatch(new RegExp(`^\\^${major}\\.`));
  });

  it("is multi-stage on a pinned Node base and ships production dependencies only", () => {
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:\d+\.\d+\.\d+-[a-z]+-slim$/m);
    expect(dockerfile.match(/^FROM /gm)).toHaveLength(3);
    expect(dockerfile).toMatch(/^RUN .*npm ci --omit=dev/m);
    const final = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
    expect(final).toContain("COPY --from=deps --chown=root:root /app/node_modules ./node_modules");
    expect(final).not.toMatch(/^RUN /m); // nothing installed or built in the final stage
  });

  it("runs as a non-root user, which the chart requires without fixing its number, on the chart's ports", () => {
    const user = /^USER (\d+):(\d+)$/m.exec(dockerfile)?.slice(1);
    expect(user?.[0]).toBeDefined();
    expect(user?.[0]).not.toBe("0");
    const v = parse(read("deploy/helm/values.yaml")) as { podSecurityContext: Record<string, unknown> };
    expect(v.podSecurityContext).toMatchObject({ runAsNonRoot: true });
    // No fixed runAsUser: OpenShift's restricted SCC assigns its own.
    expect(v.podSecurityContext.runAsUser).toBeUndefined();
    expect(/^EXPOSE (.*)$/m.exec(dockerfile)?.[1]?.split(" ").map(Number)).toEqual([
      values.service.port,
      values.service.metricsPort,
    ]);
  });

  it("starts the entry point the build produces (dist.test.ts runs it), in the modes the chart runs", () => {
    // The flags are the ones the benchmarks measured the product with.
    expect(dockerfile).toContain(
      `ENTRYPOINT ${JSON.stringify(["node", ...RUNTIME_FLAGS, "dist/src/main.js"]).replaceAll(",", ", ")}`,
    );
    // The runtime's environment is the one the benchmarks measured the product with.
    const mallocEnv = Object.fromEntries(
      [...dockerfile.matchAll(/^ENV (MALLOC_\w+)=(\S+)$/gm)].map((m) => [m[1], m[2]]),
    );
    expect(mallocEnv).toEqual(RUNTIME_ENV);
    const deployment = read("deploy/helm/templates/deployment.yaml");
    expect(deployment).toContain('args: ["controller"]');
    expect(deployment).toContain('args: ["webhooks"]');
  });

  it("sends only what the build needs as its context", () => {
    const ignore = read(".dockerignore")
      .split("\n")
      .filter((l) => l && !l.startsWith("#"));
    expect(ignore[0]).toBe("**");
    expect(ignore.slice(1).sort()).toEqual(
      ["!package-lock.json", "!package.json", "!src/**", "!tsconfig.build.json", "!tsconfig.json"].sort(),
    );
    for (const f of ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json", "src"])
      expect(dockerfile).toMatch(new RegExp(`^COPY [^\\n]*\\b${f.replace(".", "\\.")}\\b`, "m"));
  });

  it("leaves out the provider simulator: the build compiles the product's sources and their imports only", () => {
    // tsc compiles the files tsconfig.build.json includes and every file they import: a product
    // module that imported tools/simulator would pull it into dist/ and so into the image.
    const config = ts.getParsedCommandLineOfConfigFile(
      join(REPO_ROOT, "tsconfig.build.json"),
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
        },
      },
    )!;
    const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
    const compiled = program
      .getSourceFiles()
      .map((f) => relative(REPO_ROOT, f.fileName))
      .filter((f) => !f.startsWith("node_modules/") && !f.startsWith(".."));
    expect(compiled.length).toBeGreaterThan(0);
    expect(compiled.filter((f) => !f.startsWith("src/"))).toEqual([]);
    expect(compiled.filter((f) => /simulator/i.test(f))).toEqual([]);
    // The final stage copies the compiled product alone.
    const final = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
    const copies = [...final.matchAll(/^COPY .*$/gm)].map((m) => m[0]);
    expect(copies.filter((c) => /simulator|tools/.test(c))).toEqual([]);
    expect(copies.filter((c) => c.includes("--from=build"))).toEqual([
      "COPY --from=build --chown=root:root /app/dist/src ./dist/src",
    ]);
  });
});
