package a2a_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/mcpv2/mcpv2/edge"
	pb "github.com/mcpv2/mcpv2/edge/a2a/a2apb"
	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestGRPCOverTLS: an edge with --tls-cert serves the gRPC binding on its
// one port over h2 (ALPN), beside HTTPS; a grpc-go client that trusts the
// edge's CA runs a task there, and the v1.0 card names the same port.
func TestGRPCOverTLS(t *testing.T) {
	ca := testenv.NewCA(t, "edge CA")
	cert, key := ca.Issue(t, "edge", true)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRigEdge(t, nil, func(c *edge.Config) { c.TLSCert, c.TLSKey = certFile, keyFile }, nil)
	if !r.e.TLS() {
		t.Fatal("the edge does not serve TLS")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	target := "127.0.0.1:" + strconv.Itoa(r.e.BoundPort())
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := pb.NewA2AServiceClient(cc)
	ctx := withToken(t.Context(), r.token())
	res, err := c.SendMessage(ctx, &pb.SendMessageRequest{Message: skillMsg("ping", map[string]any{"payload": "tls"})})
	if err != nil {
		t.Fatalf("SendMessage over TLS: %v", err)
	}
	if res.GetTask().GetStatus().GetState() != pb.TaskState_TASK_STATE_COMPLETED || !strings.Contains(res.GetTask().String(), "pong") {
		t.Fatalf("SendMessage over TLS: %v", res)
	}
	card, err := c.GetExtendedAgentCard(ctx, &pb.GetExtendedAgentCardRequest{})
	if err != nil {
		t.Fatalf("GetExtendedAgentCard over TLS: %v", err)
	}
	var grpcURL string
	for _, i := range card.GetSupportedInterfaces() {
		if i.GetProtocolBinding() == "GRPC" {
			grpcURL = i.GetUrl()
		}
	}
	if !strings.HasSuffix(grpcURL, ":"+strconv.Itoa(r.e.BoundPort())) {
		t.Fatalf("the card's gRPC interface %q is not the edge's port %d: %v", grpcURL, r.e.BoundPort(), card.GetSupportedInterfaces())
	}
}
