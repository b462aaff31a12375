// A tool the tests run, built once from its Go module (`go install <module>/cmd/<tool>@<version>`,
// nothing downloaded but Go modules) and cached in .local/bin. Test files running side by side take
// a lock, so only one of them compiles (minutes on a cold Go cache) while the others wait.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { goFailure, processAlive, REPO_ROOT } from "./controlplane.js";

export interface GoTool {
  /** The binary `go install` writes (the package's last path element), e.g. "helm". */
  name: string;
  /** The version shown in logs. */
  version: string;
  /** Where the built binary is cached. */
  bin: string;
  /** `<package>@<module version>`. */
  pkg: string;
  ldflags: string[];
  tags?: string;
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** The tool's path, built first if it is not cached yet. */
export function goInstalledBinary(
  tool: GoTool,
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): string {
  const bin = tool.bin;
  if (existsSync(bin)) return bin;
  mkdirSync(dirname(bin), { recursive: true });
  const lock = `${bin}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch {
      if (existsSync(bin)) return bin;
      let holder = 0;
      try {
        holder = Number(readFileSync(join(lock, "pid"), "utf8"));
      } catch {
        /* the holder is between mkdir and writing its pid */
      }
      if (holder && !processAlive(holder)) rmSync(lock, { recursive: true, force: true });
      else sleep(1_000);
    }
  }
  try {
    if (existsSync(bin)) return bin;
    return build(tool, log);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function build(tool: GoTool, log: (line: string) => void): string {
  const gobin = `${tool.bin}.build-${process.pid}`;
  mkdirSync(gobin, { recursive: true });
  log(
    `building ${tool.name} ${tool.version} from its Go module into ${tool.bin} (first time only; takes minutes)`,
  );
  const started = Date.now();
  try {
    // -v prints each package as it compiles: progress, not silence.
    const res = spawnSync(
      "go",
      [
        "install",
        "-v",
        "-trimpath",
        ...(tool.tags ? ["-tags", tool.tags] : []),
        "-ldflags",
        tool.ldflags.join(" "),
        tool.pkg,
      ],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, GOTOOLCHAIN: "local", GOBIN: gobin, GOFLAGS: "" },
        stdio: ["ignore", "inherit", "inherit"],
      },
    );
    if (res.status !== 0) throw new Error(`building ${tool.name} failed: ${goFailure(res)}`);
    renameSync(join(gobin, tool.name), tool.bin);
  } finally {
    rmSync(gobin, { recursive: true, force: true });
  }
  log(`${tool.name} built in ${Math.round((Date.now() - started) / 1000)} s`);
  return tool.bin;
}
