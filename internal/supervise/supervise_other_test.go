//go:build !unix

package supervise

// unixChild plays no part where there are no process groups.
func unixChild(string) (int, bool) { return 0, false }
