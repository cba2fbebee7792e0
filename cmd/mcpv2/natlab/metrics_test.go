//go:build linux

package natlab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// natlabMetricsAddr is B's --metrics, on the loopback of its namespace.
const natlabMetricsAddr = "127.0.0.1:9464"

// TestNATLabMetrics is issue 22's acceptance 1 for hole punches: an agent
// B behind endpoint-independent NAT serves --metrics; once it is
// reachable, fresh clients in A's network call it, each call's relayed
// connection making B punch a hole (DCUtR); B's metrics, scraped in its
// namespace, count exactly those punches as successes (go-libp2p's hole
// punching tracer on the node's registry), exactly those calls, and the
// direct connection they left.
func TestNATLabMetrics(t *testing.T) {
	ipBin, nftBin := natlabTools(t)
	curl, _ := exec.LookPath("curl") // natlabTools checked it
	natlabRemoveStale(t, ipBin)
	natlabWaitQuiet(t, 4*time.Minute)
	skills := filepath.Join(t.TempDir(), "skills.json")
	if err := os.WriteFile(skills, []byte(natlabSkills), 0o600); err != nil {
		t.Fatal(err)
	}
	lab := newNATLab(t, ipBin, nftBin, "m", false)
	relay := natlabRelay(t, lab)
	tr := natlabTransports[0]
	relayAddr := relay.addr(t, natlabRelayIP, tr.kind)
	b := lab.startNode("peerB", "B", t.TempDir(), append(natlabBArgs(relayAddr, skills), "--metrics", natlabMetricsAddr)...)
	natlabWaitReachable(t, lab, b, relayAddr, tr)

	scrape := func() natlabScrape {
		t.Helper()
		r := lab.exec("peerB", 20*time.Second, curl, "-sS", "--max-time", "10", "http://"+natlabMetricsAddr+"/metrics")
		if r.code != 0 || !strings.Contains(r.stdout, "mcpv2_calls_total") {
			t.Fatalf("scrape B's metrics in its namespace: %s", r)
		}
		return natlabScrape(r.stdout)
	}
	punches := func(s natlabScrape) (all, ok float64) {
		return s.sum("libp2p_holepunch_outcomes_total", `side="initiator"`), s.sum("libp2p_holepunch_outcomes_total", `side="initiator"`, `outcome="success"`)
	}
	chess := func(s natlabScrape) float64 {
		return s.sum("mcpv2_calls_total", `face="mesh"`, `skill="chess"`, `outcome="ok"`, `caller="peer"`)
	}
	// The probe's calls (natlabWaitReachable) punched too: wait until B
	// has recorded them (the same count in three scrapes, 0.5 s apart),
	// and count from there.
	before := scrape()
	for stable, deadline := 0, time.Now().Add(30*time.Second); stable < 2; {
		time.Sleep(500 * time.Millisecond)
		next := scrape()
		a, _ := punches(next)
		a0, _ := punches(before)
		if a == a0 && chess(next) == chess(before) {
			stable++
		} else {
			stable = 0
		}
		before = next
		if time.Now().After(deadline) {
			t.Fatalf("B's punch and call counts still change 30 s after B was reachable")
		}
	}

	const calls = 2
	for i := range calls {
		aDir := t.TempDir()
		aID := natlabIdentity(t, aDir)
		r := lab.run("peerA", 2*time.Minute, "call", b.peerID, "chess", `{"move":"e4"}`, "--secret", natlabSecret, "--data-dir", aDir, "--bootstrap", relayAddr)
		if r.code != 0 || strings.TrimSpace(r.stdout) != natlabAnswer {
			t.Fatalf("call %d: %s", i+1, r)
		}
		m := natlabDirectRE.FindStringSubmatch(r.stderr)
		remote := natlabAudit(t, b, aID, protocol.MethodToolsCall)
		if m == nil || m[1] != b.peerID || strings.Contains(m[2], "/p2p-circuit") || remote == "" || strings.Contains(remote, "/p2p-circuit") {
			t.Fatalf("call %d did not go direct after a hole punch (client %q, B saw %q): the lab's endpoint-independent NAT punches every time; client stderr:\n%s",
				i+1, m, remote, natlabTail(r.stderr, 15))
		}
	}

	// B records a punch's outcome when its last attempt ends, maybe just
	// after the client's call returned: wait for the count, then check it
	// is exact.
	all0, ok0 := punches(before)
	var after natlabScrape
	for deadline := time.Now().Add(20 * time.Second); ; {
		after = scrape()
		if all, _ := punches(after); all >= all0+calls || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	all, ok := punches(after)
	t.Logf("B's hole punches (initiator): %v before the test's calls, %v after; successes %v → %v", all0, all, ok0, ok)
	if all-all0 != calls || ok-ok0 != calls {
		t.Errorf("hole punches counted by B for the test's %d calls: %v, %v of them successes; want exactly %d, all successes\n%s",
			calls, all-all0, ok-ok0, calls, after.grep("libp2p_holepunch_"))
	}
	if d := chess(after) - chess(before); d != calls {
		t.Errorf("chess calls counted by B: %v, want %d", d, calls)
	}
	if d := after.sum("mcpv2_connections", `path="direct"`); d < 1 {
		t.Errorf("B's direct connections after direct calls: %v, want at least 1\n%s", d, after.grep("mcpv2_connections"))
	}
	if r := after.sum("libp2p_relay_reservations_opened_total") + after.sum("libp2p_autorelay_reservations_opened_total"); r < 1 {
		t.Errorf("B counted no relay reservation (it is reachable only through one)\n%s", after.grep("reservation"))
	}
}

// natlabScrape is a Prometheus text exposition.
type natlabScrape string

// sum adds the values of name's samples whose labels contain every one of
// labels (`key="value"`); a histogram's or summary's parts are other names.
func (s natlabScrape) sum(name string, labels ...string) float64 {
	v := 0.0
	for _, line := range strings.Split(string(s), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, lbls, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(lbls, l)
		}
		if f, err := strconv.ParseFloat(strings.Fields(val)[0], 64); err == nil && match {
			v += f
		}
	}
	return v
}

// grep returns the sample lines that contain sub, for failure messages.
func (s natlabScrape) grep(sub string) string {
	var out []string
	for _, line := range strings.Split(string(s), "\n") {
		if !strings.HasPrefix(line, "#") && strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
