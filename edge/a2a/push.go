package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/protocol"
)

// PushStore is what a Backend may also offer (*node.Node does) for push
// notifications: the configs of each task, kept in the node's store and
// deleted with the task. A face over a Backend without it has no push
// notifications (capabilities.pushNotifications false; the four config
// operations answer PushNotificationNotSupportedError).
type PushStore interface {
	// SavePushConfig keeps config id of task taskID (replacing one of the
	// same id); a task holds at most max.
	SavePushConfig(taskID, id string, config json.RawMessage, max int) error
	// PushConfigs returns the configs of task taskID.
	PushConfigs(taskID string) ([]json.RawMessage, error)
	// DeletePushConfig deletes config id of task taskID and says whether
	// there was one.
	DeletePushConfig(taskID, id string) (bool, error)
}

// Caps of the push-notification configs.
const (
	// MaxPushConfigs caps the configs of one task.
	MaxPushConfigs = 8
	maxPushURL     = 2048
	maxPushToken   = 512
	maxPushCred    = 4096
	maxPushID      = 128
	maxPushScheme  = 64
	// maxPushJSON is the store's cap on one config as it is kept, JSON
	// with json.Marshal's escapes (node/store.MaxPushConfigBytes):
	// checkPush holds a config to it, so that an oversized field is the
	// client's error, never the store's.
	maxPushJSON = 8 << 10
	// pushResolveTimeout bounds the DNS lookup of a webhook's host when
	// its config is set.
	pushResolveTimeout = 5 * time.Second
)

// pushConfig is one webhook of a task, as the store keeps it.
type pushConfig struct {
	ID     string `json:"id"`
	TaskID string `json:"taskId"`
	URL    string `json:"url"`
	// Token is the client's token, sent back as X-A2A-Notification-Token.
	Token string `json:"token,omitempty"`
	// Scheme and Credentials are the client's authentication for the
	// webhook (Authorization: Scheme Credentials); without Credentials
	// the notification carries the node's JWT (Bearer).
	Scheme      string `json:"scheme,omitempty"`
	Credentials string `json:"credentials,omitempty"`
	// Version is the A2A version the config was set in: the form of the
	// notifications ("1.0": a StreamResponse; "0.3": the task).
	Version string `json:"version"`
	// Caller, CallerOwner and CallerKind name who set it, for the audit
	// line of a notification that was dropped.
	Caller      string              `json:"caller,omitempty"`
	CallerOwner string              `json:"callerOwner,omitempty"`
	CallerKind  protocol.CallerKind `json:"callerKind,omitempty"`
}

// setBy names the caller of q as the config's, before setPush: checkPush
// then measures the config as it is kept.
func (c *pushConfig) setBy(q *req) {
	c.Caller, c.CallerOwner, c.CallerKind = q.c.ID, q.owner, q.c.Kind
}

// pushAuthV1 is AuthenticationInfo of v1.0; pushAuthV03 is
// PushNotificationAuthenticationInfo of v0.3.
type pushAuthV1 struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials"`
}

type pushAuthV03 struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials"`
}

// pushConfigV1 is TaskPushNotificationConfig of v1.0 (ProtoJSON).
type pushConfigV1 struct {
	Tenant         string      `json:"tenant"`
	ID             string      `json:"id"`
	TaskID         string      `json:"taskId"`
	URL            string      `json:"url"`
	Token          string      `json:"token"`
	Authentication *pushAuthV1 `json:"authentication"`
}

// pushConfigV03 is PushNotificationConfig of v0.3.
type pushConfigV03 struct {
	ID             string       `json:"id"`
	URL            string       `json:"url"`
	Token          string       `json:"token"`
	Authentication *pushAuthV03 `json:"authentication"`
}

// v1 is c as v1.0 reads it back: without the credentials (the spec: they
// are omitted when a config is read).
func (c pushConfig) v1() map[string]any {
	out := map[string]any{"id": c.ID, "taskId": c.TaskID, "url": c.URL}
	if c.Token != "" {
		out["token"] = c.Token
	}
	if c.Scheme != "" {
		out["authentication"] = map[string]any{"scheme": c.Scheme}
	}
	return out
}

// v03 is c as v0.3 reads it back: a TaskPushNotificationConfig.
func (c pushConfig) v03() map[string]any {
	pc := map[string]any{"id": c.ID, "url": c.URL}
	if c.Token != "" {
		pc["token"] = c.Token
	}
	if c.Scheme != "" {
		pc["authentication"] = map[string]any{"schemes": []string{c.Scheme}}
	}
	return map[string]any{"taskId": c.TaskID, "pushNotificationConfig": pc}
}

// wire is c in the request's version.
func (q *req) pushWire(c pushConfig) any {
	if q.v == "1.0" {
		return c.v1()
	}
	return c.v03()
}

// fromV1 and fromV03 read a config in either wire form.
func fromV1(p pushConfigV1) pushConfig {
	c := pushConfig{ID: p.ID, TaskID: p.TaskID, URL: p.URL, Token: p.Token, Version: "1.0"}
	if a := p.Authentication; a != nil {
		c.Scheme, c.Credentials = a.Scheme, a.Credentials
	}
	return c
}

func fromV03(taskID string, p pushConfigV03) pushConfig {
	c := pushConfig{ID: p.ID, TaskID: taskID, URL: p.URL, Token: p.Token, Version: "0.3"}
	if a := p.Authentication; a != nil {
		if len(a.Schemes) > 0 {
			c.Scheme = a.Schemes[0]
		}
		c.Credentials = a.Credentials
	}
	return c
}

// checkPush checks a config a caller sets: the sizes, the URL's form, and
// its host's addresses against the outbound scope (the dial checks them
// again). An error is -32602 and names what was wrong.
func (f *Face) checkPush(ctx context.Context, c *pushConfig) *rpcError {
	bad := func(format string, a ...any) *rpcError {
		return rpcErrf(protocol.CodeInvalidParams, "invalid params: push notification config: "+format, a...)
	}
	switch {
	case c.URL == "":
		return bad("url is missing")
	case len(c.URL) > maxPushURL:
		return bad("url is longer than %d bytes", maxPushURL)
	case len(c.Token) > maxPushToken:
		return bad("token is longer than %d bytes", maxPushToken)
	case len(c.Credentials) > maxPushCred:
		return bad("authentication.credentials is longer than %d bytes", maxPushCred)
	case len(c.ID) > maxPushID || strings.ContainsFunc(c.ID, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return bad("id must be at most %d bytes of printable text", maxPushID)
	case c.Scheme != "" && (len(c.Scheme) > maxPushScheme || netscope.CheckHeader(c.Scheme) != nil):
		return bad("authentication scheme %q is not an HTTP auth scheme name (Bearer, Basic…)", protocol.Clip(c.Scheme, 40))
	case c.Credentials != "" && c.Scheme == "":
		return bad("authentication.credentials needs a scheme")
	case strings.ContainsAny(c.Token+c.Credentials, "\r\n\x00"):
		return bad("token and credentials must be one line")
	}
	u, err := netscope.CheckURL(c.URL)
	if err != nil {
		return bad("url %q: %v", protocol.Clip(c.URL, 200), err)
	}
	if u.Fragment != "" {
		return bad("url %q: a webhook URL has no fragment", protocol.Clip(c.URL, 200))
	}
	if c.ID == "" {
		c.ID = newID()
	}
	// As kept: json.Marshal escapes <, >, & and control characters (six
	// bytes each), so a field within its cap may still not fit.
	if b, _ := json.Marshal(c); len(b) > maxPushJSON {
		name, most := "url", 0
		for _, f := range []struct{ name, v string }{{"url", c.URL}, {"token", c.Token}, {"authentication.credentials", c.Credentials}, {"id", c.ID}} {
			if fb, _ := json.Marshal(f.v); len(fb) > most {
				name, most = f.name, len(fb)
			}
		}
		return bad("it is %d bytes as JSON, more than the %d a config may; %s takes %d of them (JSON escapes <, > and & as six bytes each)", len(b), maxPushJSON, name, most)
	}
	host := strings.Trim(u.Hostname(), "[]")
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, pushResolveTimeout)
		defer cancel()
		if addrs, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host); err != nil || len(addrs) == 0 {
			return bad("url %q: its host %q does not resolve", protocol.Clip(c.URL, 200), protocol.Clip(host, 100))
		}
	}
	for _, a := range addrs {
		if err := f.push.scope.Check(a); err != nil {
			var se *netscope.Error
			class := "non-public"
			if errors.As(err, &se) {
				class = se.Class
			}
			return bad("url %q: its host is %s, a %s address: this agent sends notifications only to public addresses (%v)", protocol.Clip(c.URL, 200), a, class, err)
		}
	}
	return nil
}

// pushOff answers the config operations of a face without push.
func pushOff(q *req) {
	q.fail(rpcErrf(codePushNotSupported, "push notifications are not supported by this agent; stream the task, or subscribe to it"))
}

// setPush checks config c of the caller's task and keeps it; c is set by
// q already (setBy), as checkPush measures it.
func (f *Face) setPush(q *req, c *pushConfig) *rpcError {
	if e := f.checkPush(q.ctx, c); e != nil {
		return e
	}
	if q.wire == "0.3" { // a v0.3 client, whose request may run as v1.0 (rest03.go, v03pb.go)
		c.Version = "0.3"
	}
	b, _ := json.Marshal(c)
	if err := f.push.store.SavePushConfig(c.TaskID, c.ID, b, MaxPushConfigs); err != nil {
		f.log.Debug("a2a: save push config", "task", c.TaskID, "err", err)
		if e := storeRefusal(err, ""); e != nil { // a cap: one config too many, or the owner's share of the store
			return e
		}
		return rpcErrf(protocol.CodeInternal, "internal error: the push notification config could not be saved")
	}
	return nil
}

// pushCreate serves CreateTaskPushNotificationConfig
// (tasks/pushNotificationConfig/set).
func (f *Face) pushCreate(q *req, params json.RawMessage) {
	var c pushConfig
	if q.v == "1.0" {
		var p pushConfigV1
		if e := decodeParams(params, &p); e != nil {
			q.fail(e)
			return
		}
		c = fromV1(p)
	} else {
		var p struct {
			TaskID                 string         `json:"taskId"`
			PushNotificationConfig *pushConfigV03 `json:"pushNotificationConfig"`
		}
		if e := decodeParams(params, &p); e != nil {
			q.fail(e)
			return
		}
		if p.PushNotificationConfig == nil {
			q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: pushNotificationConfig is missing"))
			return
		}
		c = fromV03(p.TaskID, *p.PushNotificationConfig)
	}
	c.setBy(q)
	if e := q.loadTask(c.TaskID); e != nil {
		q.fail(e)
		return
	}
	if e := f.setPush(q, &c); e != nil {
		q.fail(e)
		return
	}
	q.reply(q.pushWire(c))
}

// pushRef is the params of get and delete: the task and the config, in
// either version (v0.3: id is the task's, pushNotificationConfigId the
// config's).
func (q *req) pushRef(params json.RawMessage) (taskID, id string, e *rpcError) {
	var p struct {
		Tenant   string `json:"tenant"`
		TaskID   string `json:"taskId"`
		ID       string `json:"id"`
		ConfigID string `json:"pushNotificationConfigId"`
		Metadata any    `json:"metadata"`
	}
	if e := decodeParams(params, &p); e != nil {
		return "", "", e
	}
	if q.v == "1.0" {
		return p.TaskID, p.ID, nil
	}
	return p.ID, p.ConfigID, nil
}

// loadTask loads the caller's task that a config operation names.
func (q *req) loadTask(taskID string) *rpcError {
	if taskID == "" {
		name := "taskId"
		if q.v == "0.3" && q.method != "tasks/pushNotificationConfig/set" {
			name = "id"
		}
		return rpcErrf(protocol.CodeInvalidParams, "invalid params: %s (the task's) is missing", name)
	}
	_, _, e := q.load(taskID)
	return e
}

// configs reads task id's configs (the caller's task: loaded first)
// through the pusher's index, which a save or delete keeps current.
func (f *Face) configs(q *req, taskID string) ([]pushConfig, *rpcError) {
	if e := q.loadTask(taskID); e != nil {
		return nil, e
	}
	cs, err := f.push.store.configs(taskID)
	if err != nil {
		f.log.Error("a2a: push configs", "task", taskID, "err", err)
		return nil, rpcErrf(protocol.CodeInternal, "internal error: the push notification configs could not be read")
	}
	return cs, nil
}

// pushGet serves GetTaskPushNotificationConfig
// (tasks/pushNotificationConfig/get; v0.3 without a config id: the
// task's first).
func (f *Face) pushGet(q *req, params json.RawMessage) {
	taskID, id, e := q.pushRef(params)
	if e != nil {
		q.fail(e)
		return
	}
	cs, e := f.configs(q, taskID)
	if e != nil {
		q.fail(e)
		return
	}
	for _, c := range cs {
		if c.ID == id || (id == "" && q.v == "0.3") {
			q.reply(q.pushWire(c))
			return
		}
	}
	q.fail(rpcErrf(codeTaskNotFound, "push notification config %q not found for task %q", protocol.Clip(id, 80), protocol.Clip(taskID, 80)))
}

// pushList serves ListTaskPushNotificationConfigs
// (tasks/pushNotificationConfig/list): every config of the task, one page
// (a task has at most MaxPushConfigs).
func (f *Face) pushList(q *req, params json.RawMessage) {
	var p struct {
		Tenant    string `json:"tenant"`
		TaskID    string `json:"taskId"`
		ID        string `json:"id"`
		PageSize  *int   `json:"pageSize"`
		PageToken string `json:"pageToken"`
		Metadata  any    `json:"metadata"`
	}
	if e := decodeParams(params, &p); e != nil {
		q.fail(e)
		return
	}
	taskID := p.TaskID
	if q.v == "0.3" {
		taskID = p.ID
	}
	if p.PageToken != "" {
		q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: pageToken %q names no page: the configs of a task are one page", protocol.Clip(p.PageToken, 80)))
		return
	}
	cs, e := f.configs(q, taskID)
	if e != nil {
		q.fail(e)
		return
	}
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, q.pushWire(c))
	}
	if q.v == "1.0" {
		q.reply(map[string]any{"configs": out, "nextPageToken": ""})
		return
	}
	q.reply(out)
}

// pushDelete serves DeleteTaskPushNotificationConfig
// (tasks/pushNotificationConfig/delete); deleting a config that is not
// there is no error.
func (f *Face) pushDelete(q *req, params json.RawMessage) {
	taskID, id, e := q.pushRef(params)
	if e != nil {
		q.fail(e)
		return
	}
	if id == "" {
		q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: the config's id is missing"))
		return
	}
	if e := q.loadTask(taskID); e != nil {
		q.fail(e)
		return
	}
	if _, err := f.push.store.DeletePushConfig(taskID, id); err != nil {
		f.log.Error("a2a: delete push config", "task", taskID, "err", err)
		q.fail(rpcErrf(protocol.CodeInternal, "internal error: the push notification config could not be deleted"))
		return
	}
	if q.v == "1.0" {
		q.reply(map[string]any{})
		return
	}
	q.reply(nil)
}

// dispatchPush runs one of the four config operations.
func (f *Face) dispatchPush(q *req, op string, params json.RawMessage) {
	if f.push == nil {
		pushOff(q)
		return
	}
	switch op {
	case "push.create":
		f.pushCreate(q, params)
	case "push.get":
		f.pushGet(q, params)
	case "push.list":
		f.pushList(q, params)
	case "push.delete":
		f.pushDelete(q, params)
	}
}

// sendPush reads the push config a message's configuration carries
// (v1.0 taskPushNotificationConfig, v0.3 pushNotificationConfig) for task
// taskID; nil when it carries none.
func (q *req) sendPush(v1, v03 json.RawMessage, taskID string) (*pushConfig, *rpcError) {
	var c pushConfig
	switch {
	case q.v == "1.0" && len(v1) > 0 && string(v1) != "null":
		var p pushConfigV1
		if e := decodeParams(v1, &p); e != nil {
			return nil, e
		}
		c = fromV1(p)
	case q.v == "0.3" && len(v03) > 0 && string(v03) != "null":
		var p pushConfigV03
		if e := decodeParams(v03, &p); e != nil {
			return nil, e
		}
		c = fromV03(taskID, p)
	default:
		return nil, nil
	}
	if q.f.push == nil {
		return nil, rpcErrf(codePushNotSupported, "push notifications are not supported by this agent; send the message without a push notification config")
	}
	if c.TaskID != "" && c.TaskID != taskID {
		return nil, rpcErrf(protocol.CodeInvalidParams, "invalid params: the push notification config names task %q, not the message's", protocol.Clip(c.TaskID, 80))
	}
	c.TaskID = taskID
	c.setBy(q)
	return &c, nil
}
