package a2aclient

import (
	"encoding/json"
	"testing"
)

// TestFold folds answers of both versions into a Result: file parts,
// several data parts, a direct message answer, an appended artifact.
func TestFold(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []string
		want   string
	}{
		{"v1.0 message answer", []string{`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"hi"},{"data":{"x":1}}]}}`},
			`{"task_id":"","context_id":"","state":"completed","text":"hi","data":{"x":1}}`},
		{"v0.3 task with files", []string{`{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"},"artifacts":[{"artifactId":"a","name":"out","parts":[{"kind":"file","file":{"name":"f.txt","mimeType":"text/plain","bytes":"aGk="}},{"kind":"file","file":{"uri":"https://x/y"}}]}]}`},
			`{"task_id":"t","context_id":"c","state":"completed","text":"","artifacts":[{"name":"out","parts":[{"file":{"name":"f.txt","mime_type":"text/plain","bytes":"aGk="}},{"file":{"uri":"https://x/y"}}]}]}`},
		{"v1.0 stream, appended chunk, two data parts", []string{
			`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_SUBMITTED"}}}`,
			`{"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"a","parts":[{"text":"one "}]}}}`,
			`{"artifactUpdate":{"taskId":"t","append":true,"artifact":{"artifactId":"a","parts":[{"text":"two"},{"data":{"n":2}}]}}}`,
			`{"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"b","parts":[{"data":[3]},{"raw":"AAE=","filename":"b.bin","mediaType":"application/octet-stream"}]}}}`,
			`{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"parts":[{"text":"done"}]}}}}`},
			`{"task_id":"t","context_id":"c","state":"completed","text":"one \ntwo","data":[{"n":2},[3]],"artifacts":[{"parts":[{"text":"one "},{"text":"two"},{"data":{"n":2}}]},{"parts":[{"data":[3]},{"file":{"name":"b.bin","mime_type":"application/octet-stream","bytes":"AAE="}}]}]}`},
		{"v0.3 input-required", []string{
			`{"kind":"task","id":"t","contextId":"c","status":{"state":"submitted"}}`,
			`{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"input-required","message":{"kind":"message","parts":[{"kind":"text","text":"who?"}]}},"final":true}`},
			`{"task_id":"t","context_id":"c","state":"input-required","text":"who?"}`},
		{"v1.0 GetTask answer, unknown state", []string{`{"id":"t","contextId":"c","status":{"state":"TASK_STATE_SOMETHING"}}`},
			`{"task_id":"t","context_id":"c","state":"unknown","text":""}`},
	} {
		var tk *task
		for _, e := range tc.events {
			ev, err := decodeEvent(json.RawMessage(e))
			if err != nil {
				t.Fatalf("%s: %s: %v", tc.name, e, err)
			}
			tk = apply(tk, ev)
		}
		got, _ := json.Marshal(tk.result())
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `{}`, `{"kind":"task","status":{"state":"completed"}}`, `{"task":{"status":{}}}`} {
		if _, err := decodeEvent(json.RawMessage(bad)); err == nil {
			t.Errorf("decodeEvent(%s): no error", bad)
		}
	}
}
