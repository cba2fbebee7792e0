//go:build linux

package natlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/chrometest"
)

// TestNATLabDashboard (issue 21, acceptance 1): an agent A behind one NAT
// calls B, behind another, from its dashboard's Mesh page, by PeerID: the
// call goes through the relay, then hole punching makes the connection
// direct. A's Peers page shows it so: B's connection is direct, and B's
// history has a relayed connection before a direct one, and a hole punch
// that succeeded. The browser runs in A's namespace, where the dashboard
// listens on loopback.
func TestNATLabDashboard(t *testing.T) {
	ipBin, nftBin := natlabTools(t)
	natlabRemoveStale(t, ipBin)
	natlabWaitQuiet(t, 4*time.Minute)
	skills := filepath.Join(t.TempDir(), "skills.json")
	if err := os.WriteFile(skills, []byte(natlabSkills), 0o600); err != nil {
		t.Fatal(err)
	}
	lab := newNATLab(t, ipBin, nftBin, "d", false)
	relay := natlabRelay(t, lab)
	relayAddr := relay.addr(t, natlabRelayIP, "/tcp/")
	b := lab.startNode("peerB", "B", t.TempDir(), natlabBArgs(relayAddr, skills)...)
	a := lab.startNode("peerA", "A", t.TempDir(), "--bootstrap", relayAddr, "--secret", natlabSecret, "--name", "alice",
		"--log-level", "debug")

	// The login link, from A's control socket (a file: reachable from
	// outside the namespace), as `mcpv2 ui` prints it.
	out, err := exec.Command(binPath, "ui", "--data-dir", a.dataDir).Output()
	link := ""
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "MCPV2_UI="); ok {
			link = v
		}
	}
	if err != nil || !strings.HasPrefix(link, "http://127.0.0.1:") {
		t.Fatalf("mcpv2 ui: %v, want a MCPV2_UI=http://127.0.0.1:… line:\n%s", err, out)
	}
	ui := link[:strings.Index(link, "/login")]

	br := chrometest.Start(t, chrometest.WithPrefix(ipBin, "netns", "exec", lab.ns["peerA"]))
	br.Open(t, link)
	br.Clean(t, "A's Node page")

	// B is found through the DHT by PeerID and called through the relay.
	br.Open(t, ui+"/mesh")
	for sel, v := range map[string]string{"#call-peer": b.peerID, "#call-skill": "chess", "#call-args": `{"move":"e4"}`} {
		if !chrometest.Eval[bool](t, br, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false;
			e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true })()`,
			chrometest.JSString(sel), chrometest.JSString(v))) {
			t.Fatalf("the Mesh page has no %s", sel)
		}
	}
	chrometest.Eval[bool](t, br, `(document.querySelector("#call-run").click(), true)`)
	chrometest.WaitDOM(t, br, 2*time.Minute, "B's answer", `(document.querySelector("#call-result").textContent + document.querySelector("#call-error").textContent).trim() !== "" &&
		!["Calling…"].includes(document.querySelector("#call-result").textContent.trim())`)
	if e := strings.TrimSpace(chrometest.Text(t, br, "#call-error")); e != "" {
		t.Fatalf("the call of B from A's dashboard failed: %s\nA's log:\n%s", e, a.logTail(30))
	}
	if got := chrometest.Text(t, br, "#call-result"); !strings.Contains(got, "I answer e4 with e5") {
		t.Errorf("#call-result = %q", got)
	}
	br.Clean(t, "A's Mesh page")

	// The Peers page (it refreshes itself): B direct, after a relayed
	// connection and a successful hole punch.
	br.Open(t, ui+"/peers")
	conn := fmt.Sprintf(`#conns tr[data-peer=%q] td.kind`, b.peerID)
	hist := fmt.Sprintf(`#history tr[data-peer=%q]`, b.peerID)
	chrometest.WaitDOM(t, br, 30*time.Second, "B's connection to be direct on the Peers page, after a successful punch",
		fmt.Sprintf(`[...document.querySelectorAll(%s)].some(td => td.textContent.trim() === "direct") &&
			Number((document.querySelector(%s) || {textContent: "0"}).textContent) >= 1`,
			chrometest.JSString(conn), chrometest.JSString(hist+" .punch-successes")))
	events := chrometest.Eval[[]string](t, br, fmt.Sprintf(`[...document.querySelectorAll(%s)].map(li => li.textContent)`,
		chrometest.JSString(hist+" .events li")))
	firstRelayed, firstDirect := -1, -1
	for i, e := range events {
		switch {
		case strings.Contains(e, " connected relayed") && firstRelayed < 0: // (the space: not "disconnected relayed")
			firstRelayed = i
		case strings.Contains(e, " connected direct") && firstDirect < 0:
			firstDirect = i
		}
	}
	if firstRelayed < 0 || firstDirect < firstRelayed {
		t.Errorf("B's history on the Peers page: %q, want a relayed connection, then a direct one", events)
	}
	if n := chrometest.Text(t, br, hist+" .punch-attempts"); strings.TrimSpace(n) == "0" {
		t.Errorf("B's history: %s hole punch attempts", n)
	}
	br.Clean(t, "A's Peers page")
	t.Logf("B on A's Peers page: %q; punches %s attempted, %s succeeded", events,
		strings.TrimSpace(chrometest.Text(t, br, hist+" .punch-attempts")), strings.TrimSpace(chrometest.Text(t, br, hist+" .punch-successes")))
}
