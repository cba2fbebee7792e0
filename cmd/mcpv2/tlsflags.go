package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// tlsFlags are the edge's TLS flags of `mcpv2 node` (SPEC §5 twin).
var tlsFlags = []cli.Flag{
	&cli.StringFlag{Name: "tls-cert", EnvVars: []string{"MCPV2_TLS_CERT"},
		Usage: "serve the edge over HTTPS with this PEM certificate (chain); needs --tls-key"},
	&cli.StringFlag{Name: "tls-key", EnvVars: []string{"MCPV2_TLS_KEY"},
		Usage: "the PEM private key of --tls-cert"},
	&cli.StringFlag{Name: "tls-client-ca", EnvVars: []string{"MCPV2_TLS_CLIENT_CA"},
		Usage: "require client certificates signed by a CA of this PEM bundle (mutual TLS); needs --tls-cert"},
	&cli.BoolFlag{Name: "enable-mtls", EnvVars: []string{"MCPV2_ENABLE_MTLS"},
		Usage: "the seed's switch for mutual TLS: require client certificates (needs --tls-client-ca)"},
}

// checkTLSFlags refuses TLS flags that cannot take effect, before anything
// starts. The files themselves are checked by edge.New.
func checkTLSFlags(c *cli.Context) error {
	anyTLS := c.String("tls-cert") != "" || c.String("tls-key") != "" || c.String("tls-client-ca") != "" || c.Bool("enable-mtls")
	switch {
	case c.Bool("enable-mtls") && c.String("tls-client-ca") == "":
		return errors.New("--enable-mtls needs --tls-client-ca FILE (the CAs whose client certificates are accepted), and --tls-cert and --tls-key")
	case anyTLS && !c.IsSet("port"):
		return errors.New("--tls-cert, --tls-key, --tls-client-ca and --enable-mtls configure the HTTP edge: add --port")
	}
	return nil
}
