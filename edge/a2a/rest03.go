package a2a

import (
	"bytes"
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/mcpv2/mcpv2/edge/a2a/a2apb"
	pb03 "github.com/mcpv2/mcpv2/edge/a2a/a2apb03"
	"github.com/mcpv2/mcpv2/protocol"
)

// A2A 0.3 over HTTP+JSON: its bodies are the ProtoJSON of the v0.3 proto
// messages (package a2a.v1), which are neither v0.3 JSON-RPC's JSON nor
// v1.0's. A request is read into its v0.3 message, converted to v1.0
// (v03pb.go) and run as v1.0; its v1.0 result or events are converted
// back. The face's operations never see v0.3 REST.

// in03 reads a body as ProtoJSON, the members it does not know dropped (a
// client's extras, as the JSON-RPC binding drops them).
var in03 = protojson.UnmarshalOptions{DiscardUnknown: true}

// params03 is the v1.0 params of a v0.3 route: the body's v0.3 message
// converted, with the path's fields.
func (rt restRoute) params03(body []byte) (json.RawMessage, *rpcError) {
	var v1 proto.Message
	switch rt.op {
	case "send", "stream":
		var r pb03.SendMessageRequest
		if e := read03(body, &r); e != nil {
			return nil, e
		}
		v1 = SendRequestFromV03(&r)
	case "push.create":
		var c pb03.TaskPushNotificationConfig
		if e := read03(body, &c); e != nil {
			return nil, e
		}
		var task string
		_ = json.Unmarshal(rt.fields["taskId"], &task)
		p, err := PushConfigFromV03(&pb03.CreateTaskPushNotificationConfigRequest{Parent: "tasks/" + task, Config: &c})
		if err != nil {
			return nil, rpcErrf(protocol.CodeInvalidParams, "invalid params: %v", err)
		}
		if n := c.GetName(); n != "" { // tasks/{id}/pushNotificationConfigs/{config}: its config id
			if t, id, err := PushNameParts(n); err == nil && t == task {
				p.Id = id
			} else {
				return nil, rpcErrf(protocol.CodeInvalidParams, "invalid params: the body's name %q is not a push config of task %q", protocol.Clip(n, 120), protocol.Clip(task, 80))
			}
		}
		v1 = p
	default: // the path and query say it all (get, cancel, subscribe, the other push ops, the card)
		return restRoute{fields: rt.fields}.params(nil)
	}
	b, err := protojson.Marshal(v1)
	if err != nil {
		return nil, rpcErrf(protocol.CodeInternal, "internal error: the request could not be converted to v1.0")
	}
	return restRoute{fields: rt.fields, body: true}.params(b)
}

// read03 reads a v0.3 request body into m. The a2a-js legacy client
// writes SendMessageRequest's request as "message", the json_name of the
// A2A 0.3 proto: it is read as request.
func read03(body []byte, m proto.Message) *rpcError {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if _, ok := m.(*pb03.SendMessageRequest); ok {
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) == nil && top["message"] != nil && top["request"] == nil {
			top["request"] = top["message"]
			delete(top, "message")
			body, _ = json.Marshal(top)
		}
	}
	if err := in03.Unmarshal(body, m); err != nil {
		return rpcErrf(protocol.CodeInvalidParams, "invalid params: the body is not the ProtoJSON of an A2A 0.3 %s: %s", m.ProtoReflect().Descriptor().Name(), protocol.Clip(err.Error(), 200))
	}
	return nil
}

// result03 is the v0.3 ProtoJSON of an operation's v1.0 result.
func result03(op string, result any) (json.RawMessage, error) {
	b, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	var out proto.Message
	switch op {
	case "send":
		var r pb.SendMessageResponse
		if err := in03.Unmarshal(b, &r); err != nil {
			return nil, err
		}
		out = SendResponseToV03(&r)
	case "get", "cancel":
		var t pb.Task
		if err := in03.Unmarshal(b, &t); err != nil {
			return nil, err
		}
		out = TaskToV03(&t)
	case "push.create", "push.get":
		var c pb.TaskPushNotificationConfig
		if err := in03.Unmarshal(b, &c); err != nil {
			return nil, err
		}
		out = PushConfigToV03(&c)
	case "push.list":
		var l pb.ListTaskPushNotificationConfigsResponse
		if err := in03.Unmarshal(b, &l); err != nil {
			return nil, err
		}
		r := &pb03.ListTaskPushNotificationConfigResponse{NextPageToken: l.GetNextPageToken()}
		for _, c := range l.GetConfigs() {
			r.Configs = append(r.Configs, PushConfigToV03(c))
		}
		out = r
	case "extcard":
		var c pb.AgentCard
		if err := in03.Unmarshal(b, &c); err != nil {
			return nil, err
		}
		out = CardToV03(&c)
	default: // push.delete: google.protobuf.Empty
		return json.RawMessage("{}"), nil
	}
	return protojson.Marshal(out)
}

// event03 is the v0.3 ProtoJSON StreamResponse of a v1.0 one.
func event03(ev any) (json.RawMessage, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	var r pb.StreamResponse
	if err := in03.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return protojson.Marshal(StreamResponseToV03(&r))
}
