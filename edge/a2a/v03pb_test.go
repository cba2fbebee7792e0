package a2a_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcpv2/mcpv2/edge/a2a"
	pb "github.com/mcpv2/mcpv2/edge/a2a/a2apb"
	pb03 "github.com/mcpv2/mcpv2/edge/a2a/a2apb03"
)

// TestV03Converters: parts and push configs go v0.3 → v1.0 → v0.3 whole,
// and the resource names are checked.
func TestV03Converters(t *testing.T) {
	d, _ := structpb.NewStruct(map[string]any{"skill": "ping"})
	parts := []*pb03.Part{
		{Part: &pb03.Part_Text{Text: "hi"}},
		{Part: &pb03.Part_File{File: &pb03.FilePart{File: &pb03.FilePart_FileWithUri{FileWithUri: "https://x/y.pdf"}, MimeType: "application/pdf", Name: "y.pdf"}}},
		{Part: &pb03.Part_File{File: &pb03.FilePart{File: &pb03.FilePart_FileWithBytes{FileWithBytes: []byte("abc")}, MimeType: "text/plain"}}},
		{Part: &pb03.Part_Data{Data: &pb03.DataPart{Data: d}}},
	}
	m := &pb03.Message{MessageId: "m", ContextId: "c", TaskId: "t", Role: pb03.Role_ROLE_USER, Content: parts}
	if back := a2a.MessageToV03(a2a.MessageFromV03(m)); !proto.Equal(back, m) {
		t.Fatalf("message round trip:\n%v\n%v", m, back)
	}
	// A v1.0 data value that is no object is {"value": …} in v0.3.
	p := a2a.PartToV03(&pb.Part{Content: &pb.Part_Data{Data: structpb.NewNumberValue(3)}})
	if p.GetData().GetData().GetFields()["value"].GetNumberValue() != 3 {
		t.Fatalf("a number as v0.3 data: %v", p)
	}

	req := &pb03.CreateTaskPushNotificationConfigRequest{Parent: "tasks/T1", ConfigId: "c1", Config: &pb03.TaskPushNotificationConfig{
		PushNotificationConfig: &pb03.PushNotificationConfig{Url: "https://hook", Token: "tok",
			Authentication: &pb03.AuthenticationInfo{Schemes: []string{"Bearer"}, Credentials: "secret"}}}}
	v1, err := a2a.PushConfigFromV03(req)
	if err != nil || v1.GetTaskId() != "T1" || v1.GetId() != "c1" || v1.GetAuthentication().GetScheme() != "Bearer" {
		t.Fatalf("push config to v1.0: %v %v", v1, err)
	}
	back := a2a.PushConfigToV03(v1)
	if back.GetName() != "tasks/T1/pushNotificationConfigs/c1" || back.GetPushNotificationConfig().GetUrl() != "https://hook" ||
		back.GetPushNotificationConfig().GetAuthentication().GetSchemes()[0] != "Bearer" {
		t.Fatalf("push config back to v0.3: %v", back)
	}
	if task, cfg, err := a2a.PushNameParts(back.GetName()); err != nil || task != "T1" || cfg != "c1" {
		t.Fatalf("push name: %s %s %v", task, cfg, err)
	}
	for _, bad := range []string{"", "T1", "tasks/", "tasks/a/b", "jobs/T1"} {
		if _, err := a2a.TaskIDFromName(bad); err == nil {
			t.Errorf("task name %q accepted", bad)
		}
	}
	if _, _, err := a2a.PushNameParts("tasks/T1/pushNotificationConfigs/"); err == nil {
		t.Error("a push name without a config id accepted")
	}
	// v0.3 blocking false (the proto3 default) leaves the face to wait.
	if r := a2a.SendRequestFromV03(&pb03.SendMessageRequest{Request: m, Configuration: &pb03.SendMessageConfiguration{HistoryLength: 2}}); r.GetConfiguration().GetReturnImmediately() || r.GetConfiguration().GetHistoryLength() != 2 {
		t.Fatalf("send request: %v", r)
	}
}
