package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/node/keys"
)

// keyRun runs `mcpv2 key args…` and fails the test unless it exits 0.
func keyRun(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	out, errs, code := run(t, append([]string{"key"}, args...)...)
	if code != 0 {
		t.Fatalf("mcpv2 key %q: exit %d\n%s", args, code, errs)
	}
	return out, errs
}

// keyFails runs `mcpv2 key args…`, wants a non-zero exit, and returns its
// stderr.
func keyFails(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := run(t, append([]string{"key"}, args...)...)
	if code == 0 {
		t.Fatalf("mcpv2 key %q: exit 0, want an error\nstdout: %s\nstderr: %s", args, out, errs)
	}
	return errs
}

// TestKeyCommand: add prints the secret alone on stdout and how to use it
// on stderr; list shows the key active, revoke revokes it, list shows it
// revoked, and the node's ring (keys.Open on the same data dir) refuses it.
func TestKeyCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	out, errs := keyRun(t, "add", "ci", "--grant", "echo,summarize", "--expires", "30d", "--data-dir", dir)
	secret := strings.TrimSuffix(out, "\n")
	if !keys.LooksLikeKey(secret) || strings.Contains(secret, "\n") {
		t.Fatalf("stdout %q: want the secret alone on one line", out)
	}
	for _, want := range []string{`"ci"`, "shown this once", "Authorization: Bearer <key>", "echo, summarize", "expires at", "mcpv2 key revoke ci"} {
		if !strings.Contains(errs, want) {
			t.Errorf("add's note does not say %q:\n%s", want, errs)
		}
	}
	// Flags in front of the name, and no --grant: the note says what the
	// key gets then.
	out, errs = keyRun(t, "--data-dir", dir, "add", "laptop")
	if !keys.LooksLikeKey(strings.TrimSpace(out)) {
		t.Fatalf("stdout %q", out)
	}
	for _, want := range []string{`"key:laptop"`, `"*"`, "ping and tools/list"} {
		if !strings.Contains(errs, want) {
			t.Errorf("add's note without --grant does not say %q:\n%s", want, errs)
		}
	}

	out, _ = keyRun(t, "list", "--data-dir", dir)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || lines[3] != "2 active" {
		t.Fatalf("list:\n%s", out)
	}
	for _, col := range []string{"STATUS", "GRANTS", "CREATED", "EXPIRES"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("the header lacks %s: %q", col, lines[0])
		}
	}
	if f := strings.Fields(lines[1]); f[0] != "ci" || f[1] != "active" || f[2] != "echo,summarize" {
		t.Errorf("ci's row: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "laptop" || f[1] != "active" || f[2] != "-" || f[len(f)-1] != "never" {
		t.Errorf("laptop's row: %q", lines[2])
	}

	// The node's view of the same data dir (MCPV2_HOME, as `mcpv2 node`
	// finds it).
	ring, err := keys.Open(filepath.Join(dir, keys.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if name, grants, err := ring.VerifyKey(secret); err != nil || name != "ci" || strings.Join(grants, ",") != "echo,summarize" {
		t.Fatalf("VerifyKey = %q, %q, %v", name, grants, err)
	}

	out, _ = keyRun(t, "revoke", "ci", "--data-dir", dir)
	if !strings.Contains(out, `revoked the API key "ci"`) || !strings.Contains(out, "next request") {
		t.Errorf("revoke says %q", out)
	}
	if _, _, err := ring.VerifyKey(secret); !errors.Is(err, keys.ErrRevoked) {
		t.Fatalf("after revoke, the node's ring: %v", err)
	}

	out, _, code := runEnv(t, []string{"MCPV2_HOME=" + dir}, "key", "list")
	if code != 0 {
		t.Fatalf("list with MCPV2_HOME: exit %d", code)
	}
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || lines[3] != "1 active" {
		t.Fatalf("list after revoke:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "ci" || f[1] != "revoked" {
		t.Errorf("ci's row after revoke: %q", lines[1])
	}

	out, _ = keyRun(t, "list", "--json", "--data-dir", dir)
	var list []struct {
		Name, Status string
		Grants       []string
		Expires      string
		Revoked      string
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(list) != 2 || list[0].Name != "ci" || list[0].Status != "revoked" || list[0].Revoked == "" || list[0].Expires == "" ||
		list[1].Name != "laptop" || list[1].Status != "active" || list[1].Grants == nil {
		t.Errorf("list --json: %+v", list)
	}
}

// TestKeyCommandErrors: each mistake exits non-zero and says what was
// wrong.
func TestKeyCommandErrors(t *testing.T) {
	dir := t.TempDir()
	keyRun(t, "add", "ci", "--data-dir", dir)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"add", "bad name"}, []string{`"bad name"`, "1 to 64 characters of A-Z"}},
		{[]string{"add", strings.Repeat("x", 65)}, []string{"1 to 64"}},
		{[]string{"add", "ci"}, []string{`"ci" is the name of an active key`, "revoke"}},
		{[]string{"add", "g", "--grant", "a b"}, []string{`grant "a b"`, "white space"}},
		{[]string{"add", "e", "--expires", "soon"}, []string{"--expires", `"soon"`, "30d"}},
		{[]string{"add", "e", "--expires", "-1h"}, []string{"negative"}},
		{[]string{"add"}, []string{"takes 1 argument", "usage"}},
		{[]string{"add", "a", "b"}, []string{"takes 1 argument"}},
		{[]string{"revoke", "nope"}, []string{"no such key", `"nope"`}},
		{[]string{"revoke"}, []string{"takes 1 argument"}},
		{[]string{"list", "--grant", "x"}, []string{"--grant is a flag of `mcpv2 key add`"}},
		{[]string{"revoke", "ci", "--json"}, []string{"--json is a flag of `mcpv2 key list`"}},
	} {
		errs := keyFails(t, append(c.args, "--data-dir", dir)...)
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("mcpv2 key %q: stderr does not say %q:\n%s", c.args, w, errs)
			}
		}
	}
	keyRun(t, "revoke", "ci", "--data-dir", dir)
	if errs := keyFails(t, "revoke", "ci", "--data-dir", dir); !strings.Contains(errs, "already revoked") {
		t.Errorf("revoke twice: %s", errs)
	}
	// A revoked name may be used again.
	keyRun(t, "add", "ci", "--data-dir", dir)

	// A revoke on a data dir that does not exist creates nothing.
	missing := filepath.Join(t.TempDir(), "none")
	if errs := keyFails(t, "revoke", "ci", "--data-dir", missing); !strings.Contains(errs, "no such key") {
		t.Errorf("revoke in a missing dir: %s", errs)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("revoke created %s: %v", missing, err)
	}

	// A broken file is named, and not overwritten.
	path := filepath.Join(dir, keys.FileName)
	writeFile(t, path, `{"version":1,"keys":[`)
	for _, sub := range [][]string{{"list"}, {"add", "x"}, {"revoke", "ci"}} {
		if errs := keyFails(t, append(sub, "--data-dir", dir)...); !strings.Contains(errs, path) || !strings.Contains(errs, "not valid JSON") {
			t.Errorf("%s on a broken file: %s", sub[0], errs)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != `{"version":1,"keys":[` {
		t.Errorf("the broken file was rewritten: %s", b)
	}
}

// TestKeyListEscapes: keys.json may be edited by hand; what reaches the
// terminal from it is escaped.
func TestKeyListEscapes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, keys.FileName), `{"version":1,"keys":[{"name":"ci","sha256":"`+strings.Repeat("ab", 32)+
		`","grants":["evil\u202egnp.exe","\u200bzero"],"created":"2026-12-01T10:00:00Z"}]}`)
	out, _ := keyRun(t, "list", "--data-dir", dir)
	if strings.ContainsAny(out, "\u202e\u200b") || !strings.Contains(out, `evil\u202egnp.exe`) {
		t.Errorf("list passes hidden characters to the terminal:\n%q", out)
	}
	out, _ = keyRun(t, "list", "--json", "--data-dir", dir)
	if strings.ContainsAny(out, "\u202e\u200b") || !strings.Contains(out, `evil\u202egnp.exe`) {
		t.Errorf("list --json passes hidden characters to the terminal:\n%q", out)
	}
}
