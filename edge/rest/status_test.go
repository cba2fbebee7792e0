package rest

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestErrorStatusIsTheEdges checks that the REST face answers an error with
// the edge's status and Retry-After (edge.ErrorStatus, edge.ErrorRetryAfter),
// not a copy of them that may drift: every code, and the rate-limit data
// forms the node and a peer's decoded answer carry.
func TestErrorStatusIsTheEdges(t *testing.T) {
	f := &Face{}
	codes := []int{protocol.CodeParseError, protocol.CodeInvalidRequest, protocol.CodeInvalidParams, protocol.CodeUnsupportedProvider,
		protocol.CodeVersionMismatch, protocol.CodeInvalidSession, protocol.CodeNotPermitted, protocol.CodePaymentFailed,
		protocol.CodeMethodNotFound, protocol.CodeSkillNotFound, protocol.CodeFileNotFound, protocol.CodeRateLimited,
		protocol.CodeSkillExecution, protocol.CodeToolExecution, protocol.CodeInternal, -1}
	datas := []any{nil, map[string]any{"retry_after_ms": int64(1500)}, map[string]any{"retry_after_ms": json.Number("2500")},
		map[string]any{"retry_after_ms": 1e12}, map[string]int64{"retry_after_ms": 900}, map[string]any{"retry_after_ms": -5.0}}
	for _, code := range codes {
		for _, d := range datas {
			e := &protocol.Error{Code: code, Message: "m", Data: d}
			w := httptest.NewRecorder()
			f.writeError(w, e, 0)
			if want := edge.ErrorStatus(e); w.Code != want {
				t.Errorf("code %d: status %d, the edge's is %d", code, w.Code, want)
			}
			got := w.Header().Get("Retry-After")
			if w.Code != 429 {
				if got != "" {
					t.Errorf("code %d: Retry-After %q on a %d", code, got, w.Code)
				}
				continue
			}
			if want := strconv.Itoa(edge.ErrorRetryAfter(e)); got != want {
				t.Errorf("code %d data %v: Retry-After %q, the edge's is %q", code, d, got, want)
			}
		}
	}
}
