package a2a

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"
)

// FuzzDecodeMessage: any bytes a client sends as a message are decoded or
// refused with a reason, never a panic; a decoded message re-encodes in
// both versions, and what it asks (callsOf) is a call or a reason.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}`,
		`{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"data","data":{"skill":"ping","arguments":{}}}]}`,
		`{"messageId":"m","role":"user","parts":[{"kind":"file","file":{"name":"a","bytes":"aGk="}}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk=","filename":"a.bin"},{"url":"http://x"}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","data":{}}]}`,
		`{"messageId":"","role":"x","parts":null}`,
		`[]`, `null`, `{"parts":[1,2,3]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMessage(json.RawMessage(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a reason")
			}
			return
		}
		if _, err := json.Marshal(m.v1()); err != nil {
			t.Fatalf("v1.0 form: %v", err)
		}
		if _, err := json.Marshal(m.v03()); err != nil {
			t.Fatalf("v0.3 form: %v", err)
		}
		calls, rerr := callsOf(m, nil)
		if rerr == nil && len(calls) == 0 {
			t.Fatal("neither a call nor a reason")
		}
	})
}

// FuzzVerifyCard: any bytes are a card that verifies or a reason.
func FuzzVerifyCard(f *testing.F) {
	f.Add([]byte(`{"name":"x","signatures":[{"protected":"eyJhbGciOiJFZERTQSIsImtpZCI6IjEyRDNLb29XIiwidHlwIjoiSk9TRSJ9","signature":"AAAA"}]}`))
	f.Add([]byte(`{"signatures":[{}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := VerifyCard(data); err == nil {
			t.Fatalf("a card no key signed verified: %s", data)
		}
	})
}

// FuzzPushConfig: any bytes a client sends as a push-notification config,
// in either version, are read or refused with a reason, never a panic; a
// config read re-encodes in both versions without its credentials. Only
// URLs whose host is an IP literal get past the form checks here (no DNS
// lookup in a fuzz run).
func FuzzPushConfig(f *testing.F) {
	for _, s := range []string{
		`{"taskId":"t","id":"a","url":"https://203.0.113.9/hook","token":"x","authentication":{"scheme":"Bearer","credentials":"c"}}`,
		`{"taskId":"t","pushNotificationConfig":{"url":"http://127.0.0.1/","authentication":{"schemes":["Basic"],"credentials":"x"}}}`,
		`{"url":"ftp://x"}`, `{"url":"http://[::1]/","authentication":{"scheme":"a b"}}`, `{"url":"http://10.0.0.1/#frag"}`,
		`{"authentication":{"credentials":"no scheme"},"url":"http://8.8.8.8/"}`, `null`, `[]`, `{"url":1}`,
	} {
		f.Add([]byte(s))
	}
	face := &Face{push: &pusher{}}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []string{"1.0", "0.3"} {
			var c pushConfig
			if v == "1.0" {
				var p pushConfigV1
				if decodeParams(data, &p) != nil {
					continue
				}
				c = fromV1(p)
			} else {
				var p struct {
					TaskID                 string         `json:"taskId"`
					PushNotificationConfig *pushConfigV03 `json:"pushNotificationConfig"`
				}
				if decodeParams(data, &p) != nil || p.PushNotificationConfig == nil {
					continue
				}
				c = fromV03(p.TaskID, *p.PushNotificationConfig)
			}
			if u, err := url.Parse(c.URL); err != nil || net.ParseIP(strings.Trim(u.Hostname(), "[]")) == nil {
				continue
			}
			if e := face.checkPush(context.Background(), &c); e != nil {
				if e.Message == "" || e.Code != -32602 {
					t.Fatalf("a refusal without a reason: %+v", e)
				}
				continue
			}
			if kept, _ := json.Marshal(c); c.ID == "" || len(c.URL) > maxPushURL || len(kept) > maxPushJSON {
				t.Fatalf("a config read without an id, or too long: %+v", c)
			}
			b1, _ := json.Marshal(c.v1())
			b3, _ := json.Marshal(c.v03())
			if strings.Contains(string(b1), `"credentials"`) || strings.Contains(string(b3), `"credentials"`) {
				t.Fatalf("credentials read back: %s %s", b1, b3)
			}
		}
	})
}
