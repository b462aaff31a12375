// The local control plane's CA, as a pod's service-account directory would hold it: the root of
// the certificate chain the apiserver serves, as PEM (tests and the footprint benchmark write it
// to ca.crt for the in-cluster configuration).
import { connect, type PeerCertificate } from "node:tls";

export async function servingCa(server: URL): Promise<string> {
  const chain = await new Promise<PeerCertificate>((resolve, reject) => {
    const socket = connect(
      { host: server.hostname, port: Number(server.port), rejectUnauthorized: false },
      () => {
        resolve(socket.getPeerCertificate(true));
        socket.end();
      },
    );
    socket.once("error", reject);
  });
  let cert = chain as PeerCertificate & { issuerCertificate?: PeerCertificate };
  while (cert.issuerCertificate && cert.issuerCertificate !== cert)
    cert = cert.issuerCertificate as typeof cert;
  const base64 = cert.raw.toString("base64").replace(/(.{64})/g, "$1\n");
  return `-----BEGIN CERTIFICATE-----\n${base64}\n-----END CERTIFICATE-----\n`;
}
