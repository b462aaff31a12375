// Node's http module as its own CommonJS exports. An ESM `import … from "node:http"` builds the
// module's ESM facade by reading every export, and among them are lazy getters (WebSocket,
// MessageEvent, CloseEvent) that load Node's bundled undici, which fetch() uses: measured at 11 MiB
// of each container's RSS for code neither runs (docs/benchmarks.md, "Runtime flags measured").
// process.getBuiltinModule returns the module without the facade.
export const nodeHttp = process.getBuiltinModule("node:http");
