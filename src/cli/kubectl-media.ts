#!/usr/bin/env node
// kubectl-media: the kubectl plugin. `kubectl media <command>` finds this executable on PATH.
// See docs/cli.md, or run `kubectl media --help`.
//
// The Node check comes before anything else is loaded: on an older Node the Kubernetes client's
// bundled HTTP library fails while loading (Node 20 has no zlib zstd), with a TypeError that says
// nothing about the Node version. So main is imported only once the version is known to be fine.
import { nodeVersionProblem } from "./node-version.js";

const problem = nodeVersionProblem(process.versions.node);
if (problem) {
  process.stderr.write(`kubectl-media: ${problem}\n`);
  process.exit(1);
}
const { main } = await import("./main.js");
const code = await main(process.argv.slice(2));
// Exit once stdout is flushed; idle keep-alive sockets must not hold a 3 a.m. shell prompt.
process.stdout.write("", () => process.exit(code));
