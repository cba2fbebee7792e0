package a2a

import (
	"encoding/json"
	"net/url"
	"testing"
)

// FuzzRESTRoute: any method, path and query of the HTTP+JSON binding is a
// route of an operation of its version, with params that are one JSON
// object, or a refusal with a reason; never a panic.
func FuzzRESTRoute(f *testing.F) {
	for _, s := range [][3]string{
		{"POST", "/message:send", ""},
		{"POST", "/v1/message:stream", ""},
		{"GET", "/tasks", "status=TASK_STATE_WORKING&pageSize=5&includeArtifacts=true"},
		{"GET", "/tasks/abc", "historyLength=2"},
		{"POST", "/tasks/a%3Ab:cancel", ""},
		{"GET", "/v1/tasks/x:subscribe", ""},
		{"DELETE", "/12D3KooWQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQm/tasks/t/pushNotificationConfigs/c", ""},
		{"GET", "/extendedAgentCard", "sessionId=x&A2A-Version=1.0"},
		{"GET", "/v1/card", ""},
		{"PUT", "/tasks/%zz", "pageSize=1&pageSize=2"},
		{"GET", "/", ""},
		{"GET", "/a/b/c/d/e/f/g", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, method, path, rawQuery string) {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		rt, e := parseRESTRoute(method, path, q)
		if rt.v != "1.0" && rt.v != "0.3" {
			t.Fatalf("version %q", rt.v)
		}
		if e != nil {
			if e.Message == "" {
				t.Fatal("a refusal without a reason")
			}
			return
		}
		if rt.allow != "" {
			t.Fatal("a route for another method, not refused")
		}
		if methodNames[rt.v][rt.op] == "" {
			t.Fatalf("op %q is no operation of A2A %s", rt.op, rt.v)
		}
		p, e := rt.params([]byte(`{"metadata":{}}`))
		if e != nil {
			return // the body names a field otherwise than the path
		}
		var m map[string]any
		if json.Unmarshal(p, &m) != nil {
			t.Fatalf("params %s are not one JSON object", p)
		}
	})
}
