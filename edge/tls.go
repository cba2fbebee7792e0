package edge

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// maxPEMFile caps what is read of a certificate, key or CA file (1 MiB): a
// CA bundle of a few hundred certificates fits many times over.
const maxPEMFile = 1 << 20

// loadTLS builds the edge's TLS configuration from Config.TLSCert, TLSKey
// and TLSClientCA: nil when none is set (plain HTTP). Every failure names
// the file and what is wrong with it, so that a bad flag fails New at once,
// before anything is bound. A certificate that is expired or not yet valid
// is logged, not refused (clients decide what they accept).
func loadTLS(cfg Config, now time.Time, log *slog.Logger) (*tls.Config, error) {
	switch {
	case cfg.TLSCert == "" && cfg.TLSKey == "" && cfg.TLSClientCA == "":
		return nil, nil
	case cfg.TLSCert == "" && cfg.TLSKey == "":
		return nil, fmt.Errorf("edge: --tls-client-ca %s needs --tls-cert and --tls-key: mutual TLS is TLS with client certificates", cfg.TLSClientCA)
	case cfg.TLSCert == "":
		return nil, fmt.Errorf("edge: --tls-key %s is given without --tls-cert", cfg.TLSKey)
	case cfg.TLSKey == "":
		return nil, fmt.Errorf("edge: --tls-cert %s is given without --tls-key", cfg.TLSCert)
	}
	certPEM, err := readPEMFile("--tls-cert", cfg.TLSCert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEMFile("--tls-key", cfg.TLSKey)
	if err != nil {
		return nil, err
	}
	if !hasPEMBlock(certPEM, "CERTIFICATE") {
		return nil, fmt.Errorf("edge: --tls-cert %s: no PEM certificate in it (want a \"BEGIN CERTIFICATE\" block, the server's first)", cfg.TLSCert)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("edge: --tls-cert %s and --tls-key %s do not make a key pair: %w", cfg.TLSCert, cfg.TLSKey, err)
	}
	if leaf := pair.Leaf; leaf != nil {
		if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
			log.Warn("the edge's TLS certificate is not valid now; clients will refuse it",
				"file", cfg.TLSCert, "not_before", leaf.NotBefore, "not_after", leaf.NotAfter)
		}
	}
	tc := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
	}
	if cfg.TLSClientCA != "" {
		caPEM, err := readPEMFile("--tls-client-ca", cfg.TLSClientCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("edge: --tls-client-ca %s: no PEM certificates in it (want one or more \"BEGIN CERTIFICATE\" blocks of the CAs that sign client certificates)", cfg.TLSClientCA)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// readPEMFile reads a PEM file named by flag, capped at maxPEMFile.
func readPEMFile(flag, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("edge: %s %s: %w", flag, path, unwrapPath(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, fmt.Errorf("edge: %s %s: %w", flag, path, unwrapPath(err))
	}
	if len(b) > maxPEMFile {
		return nil, fmt.Errorf("edge: %s %s: larger than %d bytes; not a PEM file", flag, path, maxPEMFile)
	}
	return b, nil
}

// unwrapPath drops the path of an *os.PathError, which the message names
// already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// hasPEMBlock reports whether b holds a PEM block of type typ.
func hasPEMBlock(b []byte, typ string) bool {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if blk.Type == typ {
			return true
		}
	}
}
