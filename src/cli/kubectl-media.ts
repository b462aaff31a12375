#!/usr/bin/env node
// kubectl-media: the kubectl plugin. `kubectl media <command>` finds this executable on PATH.
// See docs/cli.md, or run `kubectl media --help`.
import { main } from "./main.js";

const code = await main(process.argv.slice(2));
// Exit once stdout is flushed; idle keep-alive sockets must not hold a 3 a.m. shell prompt.
process.stdout.write("", () => process.exit(code));
