package llm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
)

// Environment variables read by [KeyFromEnv].
const (
	// EnvAPIKey holds an API key directly.
	EnvAPIKey = "MCPV2_LLM_API_KEY"
	// EnvAPIKeyFile names a file whose contents are the API key.
	EnvAPIKeyFile = "MCPV2_LLM_API_KEY_FILE"
)

// maxKeyFileBytes caps how much of a key file is read; real keys are far shorter.
const maxKeyFileBytes = 64 << 10

// KeyFromEnv returns the API key for a remote backend: the value of
// MCPV2_LLM_API_KEY, or else the contents of the file named by
// MCPV2_LLM_API_KEY_FILE, with surrounding white space trimmed. It returns ""
// and no error when neither variable is set (the local backend needs no key).
// Setting both, an unreadable or empty file, and a key holding white space,
// control or non-ASCII characters are errors. Errors name the variable or
// file, never the key.
func KeyFromEnv() (string, error) {
	key := strings.TrimSpace(os.Getenv(EnvAPIKey))
	file := strings.TrimSpace(os.Getenv(EnvAPIKeyFile))
	switch {
	case key != "" && file != "":
		return "", fmt.Errorf("llm: both %s and %s are set; set only one", EnvAPIKey, EnvAPIKeyFile)
	case key != "":
		if err := checkKey(key); err != nil {
			return "", fmt.Errorf("llm: %s: %w", EnvAPIKey, err)
		}
		return key, nil
	case file != "":
		k, err := readKeyFile(file)
		if err != nil {
			return "", fmt.Errorf("llm: %s: %w", EnvAPIKeyFile, err)
		}
		return k, nil
	default:
		return "", nil
	}
}

func readKeyFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err // *PathError names the file, not its contents.
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > maxKeyFileBytes {
		return "", fmt.Errorf("key file %s is larger than %d bytes", name, maxKeyFileBytes)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("key file %s is empty", name)
	}
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("key file %s: %w", name, err)
	}
	return key, nil
}

var errBadKey = errors.New("the key contains white space, control or non-ASCII characters")

// checkKey refuses keys that cannot travel in an HTTP header unchanged.
func checkKey(key string) error {
	for _, r := range key {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII {
			return errBadKey
		}
	}
	return nil
}
