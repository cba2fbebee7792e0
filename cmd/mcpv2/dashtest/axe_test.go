package dashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mcpv2/mcpv2/internal/chrometest"
	"github.com/mcpv2/mcpv2/internal/testenv"
)

// axeViolation is one violation of axe.run, with the targets (CSS
// selectors) of its nodes.
type axeViolation struct {
	ID      string  `json:"id"`
	Impact  string  `json:"impact"`
	Help    string  `json:"help"`
	Targets [][]any `json:"targets"`
}

var axeOnce struct {
	sync.Once
	src string
	err error
}

// npmDir holds the pinned axe-core (package-lock.json).
var npmDir, _ = filepath.Abs(filepath.Join("testdata", "npm"))

// axeSource returns axe.min.js of the pinned axe-core, installing it (npm
// ci from the lock file) once when it is missing: .ci/run installs it
// before the tests; a developer's first go test does it here. Without npm
// the test is skipped (failed under MCPV2_REQUIRE_ALL).
func axeSource(t *testing.T) string {
	t.Helper()
	axeOnce.Do(func() {
		file := filepath.Join(npmDir, "node_modules", "axe-core", "axe.min.js")
		if _, err := os.Stat(file); err != nil {
			if _, err := exec.LookPath("npm"); err != nil {
				axeOnce.err = fmt.Errorf("axe-core is not installed and npm is missing: %w", err)
				return
			}
			cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
			cmd.Dir = npmDir
			if out, err := cmd.CombinedOutput(); err != nil {
				axeOnce.err = fmt.Errorf("npm ci in %s: %v\n%s", npmDir, err, out)
				return
			}
		}
		b, err := os.ReadFile(file)
		axeOnce.src, axeOnce.err = string(b), err
	})
	if axeOnce.err != nil {
		testenv.SkipEnv(t, "%v", axeOnce.err)
	}
	return axeOnce.src
}

// axeViolations injects axe-core into the page through DevTools
// (Runtime.evaluate, which the page's CSP does not govern) and returns the
// violations of axe.run(document).
func axeViolations(t *testing.T, b *chrometest.Browser) []axeViolation {
	t.Helper()
	src := axeSource(t)
	if !chrometest.Eval[bool](t, b, "typeof window.axe === 'object'") {
		chrometest.Run(t, b, "inject axe-core", chromedp.Evaluate[chromedp.Void](src))
	}
	return chrometest.Eval[[]axeViolation](t, b, `axe.run(document).then(r => r.violations.map(v => ({
		id: v.id, impact: v.impact || "", help: v.help, targets: v.nodes.map(n => n.target)})))`)
}

// checkAxe fails t on every axe violation of the page, with its id,
// impact and the nodes' targets.
func checkAxe(t *testing.T, b *chrometest.Browser, what string) {
	t.Helper()
	for _, v := range axeViolations(t, b) {
		t.Errorf("%s: axe %s (%s): %s; nodes %v", what, v.ID, v.Impact, v.Help, v.Targets)
	}
}

// updateScreenshots names the variable that makes the tests write their
// screenshots to docs/dashboard/.
const updateScreenshots = "MCPV2_UPDATE_SCREENSHOTS"

// screenshotDir is docs/dashboard of the repository.
var screenshotDir, _ = filepath.Abs(filepath.Join("..", "..", "..", "docs", "dashboard"))

// screenshot takes a full-page PNG of the page at the viewport's width
// (chrometest.Screenshot: a PNG of that width), and writes it to
// docs/dashboard/<name>-<viewport>.png when MCPV2_UPDATE_SCREENSHOTS=1
// (so that CI leaves the tree clean).
func screenshot(t *testing.T, b *chrometest.Browser, name string, v chrometest.Viewport) {
	t.Helper()
	buf := chrometest.Screenshot(t, b, v)
	if os.Getenv(updateScreenshots) != "1" {
		return
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(screenshotDir, name+"-"+v.Name+".png")
	if err := os.WriteFile(file, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", file)
}
