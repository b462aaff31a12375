// Command controlplane runs a real kube-apiserver with an embedded etcd on loopback, for the
// project's tests, demo and local development. It is the upstream kube-apiserver (built from the
// k8s.io/kubernetes module), not a fake: admission, validation (OpenAPI and CEL), the status
// subresource, watches and RBAC behave exactly as on a cluster.
//
// Usage: controlplane --dir DIR [--port N] [--etcd-port N]
// Writes DIR/kubeconfig (admin, system:masters) once /readyz answers, then prints "READY <url>".
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	apiapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "controlplane: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	dir := flag.String("dir", "", "data directory (etcd data, certificates, kubeconfig)")
	port := flag.Int("port", 0, "apiserver secure port (0: pick a free one)")
	etcdPort := flag.Int("etcd-port", 0, "etcd client port (0: pick a free one)")
	flag.Parse()
	if *dir == "" {
		fail("--dir is required")
	}
	if *port == 0 {
		*port = freePort()
	}
	if *etcdPort == 0 {
		*etcdPort = freePort()
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail("bad --dir: %v", err)
	}
	for _, d := range []string{"etcd", "pki"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o700); err != nil {
			fail("mkdir: %v", err)
		}
	}

	// etcd, embedded. No fsync: this is test data, speed matters more than durability.
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(abs, "etcd")
	cfg.UnsafeNoFsync = true
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	clientURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *etcdPort))
	peerURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", freePort()))
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fail("etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fail("etcd did not become ready in 60s")
	}

	// Service-account signing key and an admin token (system:masters).
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fail("key: %v", err)
	}
	der, _ := x509.MarshalECPrivateKey(key)
	saKey := filepath.Join(abs, "pki", "sa.key")
	if err := os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		fail("write sa key: %v", err)
	}
	tok := make([]byte, 24)
	_, _ = rand.Read(tok)
	token := hex.EncodeToString(tok)
	tokens := filepath.Join(abs, "pki", "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		fail("write tokens: %v", err)
	}

	server := fmt.Sprintf("https://127.0.0.1:%d", *port)
	cmd := apiapp.NewAPIServerCommand()
	cmd.SetArgs([]string{
		"--etcd-servers=" + clientURL.String(),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", *port),
		"--cert-dir=" + filepath.Join(abs, "pki"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--v=0",
	})

	go func() {
		client := &http.Client{
			Timeout:   2 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback test server with a self-signed cert
		}
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					writeKubeconfig(filepath.Join(abs, "kubeconfig"), server, token)
					fmt.Printf("READY %s\n", server)
					return
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		fail("apiserver did not become ready in 120s")
	}()

	code := cli.Run(cmd)
	e.Close()
	os.Exit(code)
}

func writeKubeconfig(path, server, token string) {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: local
  context:
    cluster: local
    user: admin
    namespace: default
current-context: local
`, server, token)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(kc), 0o600); err != nil {
		fail("write kubeconfig: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		fail("write kubeconfig: %v", err)
	}
}
