// Node's http module as its own CommonJS exports. An ESM `import … from "node:http"` builds the
// module's ESM facade by reading every export, and among them are lazy getters (WebSocket,
// MessageEvent, CloseEvent) that load Node's bundled undici, which fetch() uses: its 745 KiB of
// source and what it builds, 2 MiB of the sidecar's idle heap and RSS (11 MiB in a bare process)
// for code neither container runs. process.getBuiltinModule returns the module without the facade.
export const nodeHttp = process.getBuiltinModule("node:http");
