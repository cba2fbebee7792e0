// Package dashtest holds the tests of the node's dashboard (issue 21): a
// real headless Chromium (Debian's chromium, driven with chromedp) against
// real `mcpv2 node` processes, with axe-core run in every page, the pages'
// screenshots, and the attacks on the dashboard written from the
// attacker's side. It has no code of its own: only tests, in a package of
// their own so that they run beside the others.
//
// The pinned axe-core comes from testdata/npm (npm ci --prefix
// cmd/mcpv2/dashtest/testdata/npm); MCPV2_UPDATE_SCREENSHOTS=1 writes the
// screenshots to docs/dashboard/.
package dashtest
