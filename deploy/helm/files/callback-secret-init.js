// Creates the callback Secret once: reads it, and only when the API answers 404 creates it with
// a random key. Runs in the hook Job with the Job's ServiceAccount token, on Node.js alone (the
// product's image), and never prints the key.
const https = require("node:https");
const fs = require("node:fs");
const crypto = require("node:crypto");

const dir = process.env.SERVICE_ACCOUNT_DIR || "/var/run/secrets/kubernetes.io/serviceaccount";
const token = fs.readFileSync(`${dir}/token`, "utf8").trim();
const ca = fs.readFileSync(`${dir}/ca.crt`);
const host = process.env.KUBERNETES_SERVICE_HOST;
const port = process.env.KUBERNETES_SERVICE_PORT || "443";
const ns = process.env.SECRET_NAMESPACE;
const name = process.env.SECRET_NAME;

function call(method, path, body) {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host,
        port,
        method,
        path,
        ca,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      },
    );
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

(async () => {
  const secrets = `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets`;
  const read = await call("GET", `${secrets}/${encodeURIComponent(name)}`);
  if (read === 200) return console.log(`Secret ${ns}/${name} exists: kept`);
  if (read !== 404) throw new Error(`reading Secret ${ns}/${name}: HTTP ${read}`);
  const created = await call("POST", secrets, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, labels: JSON.parse(process.env.SECRET_LABELS || "{}") },
    type: "Opaque",
    stringData: { CALLBACK_SECRET: crypto.randomBytes(32).toString("hex") },
  });
  // 409: another run created it between the read and the create; that one is kept.
  if (created === 201 || created === 409) return console.log(`Secret ${ns}/${name} created`);
  throw new Error(`creating Secret ${ns}/${name}: HTTP ${created}`);
})().catch((err) => {
  console.error(err.message);
  process.exit(1);
});
