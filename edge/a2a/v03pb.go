package a2a

//go:generate sh proto/gen.sh

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/mcpv2/mcpv2/edge/a2a/a2apb"
	pb03 "github.com/mcpv2/mcpv2/edge/a2a/a2apb03"
	"github.com/mcpv2/mcpv2/protocol"
)

// The converters between the protobuf messages of A2A v0.3 (package
// a2a.v1, pb03) and v1.0 (package lf.a2a.v1, pb). The face runs every
// call in its v1.0 form: a v0.3 request is converted to v1.0 (…FromV03),
// runs as v1.0, and its v1.0 result is converted back (…ToV03). The gRPC
// binding uses them, and so may the HTTP+JSON binding of v0.3, whose
// bodies are the ProtoJSON of the same v0.3 messages. Each takes nil to
// nil. The enums TaskState and Role have the same numbers in both
// versions (v0.3 spells 5 TASK_STATE_CANCELLED, v1.0 TASK_STATE_CANCELED).

// SendRequestFromV03 is the v1.0 form of a v0.3 SendMessageRequest. A
// v0.3 blocking of false is the proto3 default that every client sends
// when it does not say (the a2a-js client does), so it is taken as unset:
// the face waits, as it does for a JSON-RPC request without blocking.
func SendRequestFromV03(r *pb03.SendMessageRequest) *pb.SendMessageRequest {
	if r == nil {
		return nil
	}
	out := &pb.SendMessageRequest{Message: MessageFromV03(r.GetRequest()), Metadata: r.GetMetadata()}
	if c := r.GetConfiguration(); c != nil {
		oc := &pb.SendMessageConfiguration{AcceptedOutputModes: c.GetAcceptedOutputModes()}
		if c.GetHistoryLength() > 0 {
			n := c.GetHistoryLength()
			oc.HistoryLength = &n
		}
		if pc := c.GetPushNotification(); pc != nil {
			oc.TaskPushNotificationConfig = pushConfigFromV03(pc, "")
		}
		out.Configuration = oc
	}
	return out
}

// MessageFromV03 is the v1.0 form of a v0.3 Message (content → parts).
func MessageFromV03(m *pb03.Message) *pb.Message {
	if m == nil {
		return nil
	}
	out := &pb.Message{MessageId: m.GetMessageId(), ContextId: m.GetContextId(), TaskId: m.GetTaskId(),
		Role: pb.Role(m.GetRole()), Metadata: m.GetMetadata(), Extensions: m.GetExtensions()}
	for _, p := range m.GetContent() {
		out.Parts = append(out.Parts, PartFromV03(p))
	}
	return out
}

// PartFromV03 is the v1.0 form of a v0.3 Part: a file by URI is a url
// part, a file's bytes a raw part (mime type → media type, name →
// filename), a data part's object the data value.
func PartFromV03(p *pb03.Part) *pb.Part {
	if p == nil {
		return nil
	}
	out := &pb.Part{Metadata: p.GetMetadata()}
	switch c := p.GetPart().(type) {
	case *pb03.Part_Text:
		out.Content = &pb.Part_Text{Text: c.Text}
	case *pb03.Part_File:
		out.MediaType, out.Filename = c.File.GetMimeType(), c.File.GetName()
		switch f := c.File.GetFile().(type) {
		case *pb03.FilePart_FileWithUri:
			out.Content = &pb.Part_Url{Url: f.FileWithUri}
		case *pb03.FilePart_FileWithBytes:
			out.Content = &pb.Part_Raw{Raw: f.FileWithBytes}
		}
	case *pb03.Part_Data:
		d := c.Data.GetData()
		if d == nil {
			d = &structpb.Struct{}
		}
		out.Content = &pb.Part_Data{Data: structpb.NewStructValue(d)}
	}
	return out
}

// pushConfigFromV03 is the v1.0 TaskPushNotificationConfig of a v0.3
// PushNotificationConfig of task taskID: the first of its schemes is the
// scheme.
func pushConfigFromV03(c *pb03.PushNotificationConfig, taskID string) *pb.TaskPushNotificationConfig {
	if c == nil {
		return nil
	}
	out := &pb.TaskPushNotificationConfig{Id: c.GetId(), TaskId: taskID, Url: c.GetUrl(), Token: c.GetToken()}
	if a := c.GetAuthentication(); a != nil {
		out.Authentication = &pb.AuthenticationInfo{Credentials: a.GetCredentials()}
		if len(a.GetSchemes()) > 0 {
			out.Authentication.Scheme = a.GetSchemes()[0]
		}
	}
	return out
}

// PushConfigFromV03 is the v1.0 form of a v0.3
// CreateTaskPushNotificationConfigRequest: the task from its parent
// ("tasks/{id}"), the config's id from config_id when the config has none.
func PushConfigFromV03(r *pb03.CreateTaskPushNotificationConfigRequest) (*pb.TaskPushNotificationConfig, error) {
	taskID, err := TaskIDFromName(r.GetParent())
	if err != nil {
		return nil, err
	}
	out := pushConfigFromV03(r.GetConfig().GetPushNotificationConfig(), taskID)
	if out == nil {
		out = &pb.TaskPushNotificationConfig{TaskId: taskID}
	}
	if out.Id == "" {
		out.Id = r.GetConfigId()
	}
	return out, nil
}

// TaskIDFromName is the task id of a v0.3 resource name "tasks/{id}".
func TaskIDFromName(name string) (string, error) {
	id, ok := strings.CutPrefix(name, "tasks/")
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", fmt.Errorf("name %q is not tasks/{id}", protocol.Clip(name, 80))
	}
	return id, nil
}

// PushNameParts is the task id and config id of a v0.3 resource name
// "tasks/{id}/pushNotificationConfigs/{config}".
func PushNameParts(name string) (taskID, configID string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "tasks" || parts[1] == "" || parts[2] != "pushNotificationConfigs" || parts[3] == "" {
		return "", "", fmt.Errorf("name %q is not tasks/{id}/pushNotificationConfigs/{config}", protocol.Clip(name, 80))
	}
	return parts[1], parts[3], nil
}

// --- v1.0 results → v0.3

// MessageToV03 is the v0.3 form of a v1.0 Message (parts → content).
func MessageToV03(m *pb.Message) *pb03.Message {
	if m == nil {
		return nil
	}
	out := &pb03.Message{MessageId: m.GetMessageId(), ContextId: m.GetContextId(), TaskId: m.GetTaskId(),
		Role: pb03.Role(m.GetRole()), Metadata: m.GetMetadata(), Extensions: m.GetExtensions()}
	for _, p := range m.GetParts() {
		out.Content = append(out.Content, PartToV03(p))
	}
	return out
}

// PartToV03 is the v0.3 form of a v1.0 Part: url and raw parts are file
// parts, and a data value that is not an object is the object
// {"value": …}, as a v0.3 data part is an object.
func PartToV03(p *pb.Part) *pb03.Part {
	if p == nil {
		return nil
	}
	out := &pb03.Part{Metadata: p.GetMetadata()}
	switch c := p.GetContent().(type) {
	case *pb.Part_Text:
		out.Part = &pb03.Part_Text{Text: c.Text}
	case *pb.Part_Url:
		out.Part = &pb03.Part_File{File: &pb03.FilePart{File: &pb03.FilePart_FileWithUri{FileWithUri: c.Url},
			MimeType: p.GetMediaType(), Name: p.GetFilename()}}
	case *pb.Part_Raw:
		out.Part = &pb03.Part_File{File: &pb03.FilePart{File: &pb03.FilePart_FileWithBytes{FileWithBytes: c.Raw},
			MimeType: p.GetMediaType(), Name: p.GetFilename()}}
	case *pb.Part_Data:
		s := c.Data.GetStructValue()
		if s == nil {
			s = &structpb.Struct{Fields: map[string]*structpb.Value{"value": c.Data}}
			if c.Data == nil {
				s.Fields["value"] = structpb.NewNullValue()
			}
		}
		out.Part = &pb03.Part_Data{Data: &pb03.DataPart{Data: s}}
	default:
		out.Part = &pb03.Part_Text{Text: ""}
	}
	return out
}

// StatusToV03 is the v0.3 form of a v1.0 TaskStatus (message → update).
func StatusToV03(s *pb.TaskStatus) *pb03.TaskStatus {
	if s == nil {
		return nil
	}
	return &pb03.TaskStatus{State: pb03.TaskState(s.GetState()), Update: MessageToV03(s.GetMessage()), Timestamp: s.GetTimestamp()}
}

// ArtifactToV03 is the v0.3 form of a v1.0 Artifact.
func ArtifactToV03(a *pb.Artifact) *pb03.Artifact {
	if a == nil {
		return nil
	}
	out := &pb03.Artifact{ArtifactId: a.GetArtifactId(), Name: a.GetName(), Description: a.GetDescription(),
		Metadata: a.GetMetadata(), Extensions: a.GetExtensions()}
	for _, p := range a.GetParts() {
		out.Parts = append(out.Parts, PartToV03(p))
	}
	return out
}

// TaskToV03 is the v0.3 form of a v1.0 Task.
func TaskToV03(t *pb.Task) *pb03.Task {
	if t == nil {
		return nil
	}
	out := &pb03.Task{Id: t.GetId(), ContextId: t.GetContextId(), Status: StatusToV03(t.GetStatus()), Metadata: t.GetMetadata()}
	for _, a := range t.GetArtifacts() {
		out.Artifacts = append(out.Artifacts, ArtifactToV03(a))
	}
	for _, m := range t.GetHistory() {
		out.History = append(out.History, MessageToV03(m))
	}
	return out
}

// SendResponseToV03 is the v0.3 form of a v1.0 SendMessageResponse.
func SendResponseToV03(r *pb.SendMessageResponse) *pb03.SendMessageResponse {
	switch p := r.GetPayload().(type) {
	case *pb.SendMessageResponse_Task:
		return &pb03.SendMessageResponse{Payload: &pb03.SendMessageResponse_Task{Task: TaskToV03(p.Task)}}
	case *pb.SendMessageResponse_Message:
		return &pb03.SendMessageResponse{Payload: &pb03.SendMessageResponse_Msg{Msg: MessageToV03(p.Message)}}
	}
	if r == nil {
		return nil
	}
	return &pb03.SendMessageResponse{}
}

// StreamResponseToV03 is the v0.3 form of a v1.0 StreamResponse: a status
// update is final when its state ends the stream (terminal, input or auth
// required).
func StreamResponseToV03(r *pb.StreamResponse) *pb03.StreamResponse {
	switch p := r.GetPayload().(type) {
	case *pb.StreamResponse_Task:
		return &pb03.StreamResponse{Payload: &pb03.StreamResponse_Task{Task: TaskToV03(p.Task)}}
	case *pb.StreamResponse_Message:
		return &pb03.StreamResponse{Payload: &pb03.StreamResponse_Msg{Msg: MessageToV03(p.Message)}}
	case *pb.StreamResponse_StatusUpdate:
		u := p.StatusUpdate
		st := u.GetStatus().GetState()
		final := st == pb.TaskState_TASK_STATE_COMPLETED || st == pb.TaskState_TASK_STATE_FAILED || st == pb.TaskState_TASK_STATE_CANCELED ||
			st == pb.TaskState_TASK_STATE_REJECTED || st == pb.TaskState_TASK_STATE_INPUT_REQUIRED || st == pb.TaskState_TASK_STATE_AUTH_REQUIRED
		return &pb03.StreamResponse{Payload: &pb03.StreamResponse_StatusUpdate{StatusUpdate: &pb03.TaskStatusUpdateEvent{
			TaskId: u.GetTaskId(), ContextId: u.GetContextId(), Status: StatusToV03(u.GetStatus()), Final: final, Metadata: u.GetMetadata()}}}
	case *pb.StreamResponse_ArtifactUpdate:
		u := p.ArtifactUpdate
		return &pb03.StreamResponse{Payload: &pb03.StreamResponse_ArtifactUpdate{ArtifactUpdate: &pb03.TaskArtifactUpdateEvent{
			TaskId: u.GetTaskId(), ContextId: u.GetContextId(), Artifact: ArtifactToV03(u.GetArtifact()),
			Append: u.GetAppend(), LastChunk: u.GetLastChunk(), Metadata: u.GetMetadata()}}}
	}
	if r == nil {
		return nil
	}
	return &pb03.StreamResponse{}
}

// PushConfigToV03 is the v0.3 form of a v1.0 TaskPushNotificationConfig:
// named tasks/{task}/pushNotificationConfigs/{id}.
func PushConfigToV03(c *pb.TaskPushNotificationConfig) *pb03.TaskPushNotificationConfig {
	if c == nil {
		return nil
	}
	pc := &pb03.PushNotificationConfig{Id: c.GetId(), Url: c.GetUrl(), Token: c.GetToken()}
	if a := c.GetAuthentication(); a != nil {
		pc.Authentication = &pb03.AuthenticationInfo{Credentials: a.GetCredentials()}
		if a.GetScheme() != "" {
			pc.Authentication.Schemes = []string{a.GetScheme()}
		}
	}
	return &pb03.TaskPushNotificationConfig{Name: "tasks/" + c.GetTaskId() + "/pushNotificationConfigs/" + c.GetId(), PushNotificationConfig: pc}
}

// CardToV03 is the v0.3 form of a v1.0 AgentCard: url and
// preferredTransport from its first v0.3 interface (else its first),
// additionalInterfaces its v0.3 interfaces, protocolVersion 0.3.0. The
// signatures are left out: they sign the v1.0 card's JSON, not this one
// (the signed v0.3 card is the one at the well-known URL).
func CardToV03(c *pb.AgentCard) *pb03.AgentCard {
	if c == nil {
		return nil
	}
	out := &pb03.AgentCard{Name: c.GetName(), Description: c.GetDescription(), Version: c.GetVersion(),
		DocumentationUrl: c.GetDocumentationUrl(), IconUrl: c.GetIconUrl(), ProtocolVersion: "0.3.0",
		DefaultInputModes: c.GetDefaultInputModes(), DefaultOutputModes: c.GetDefaultOutputModes(),
		SupportsAuthenticatedExtendedCard: c.GetCapabilities().GetExtendedAgentCard()}
	if p := c.GetProvider(); p != nil {
		out.Provider = &pb03.AgentProvider{Url: p.GetUrl(), Organization: p.GetOrganization()}
	}
	for _, i := range c.GetSupportedInterfaces() {
		if i.GetProtocolVersion() != "0.3" {
			continue
		}
		if out.Url == "" {
			out.Url, out.PreferredTransport = i.GetUrl(), i.GetProtocolBinding()
		}
		out.AdditionalInterfaces = append(out.AdditionalInterfaces, &pb03.AgentInterface{Url: i.GetUrl(), Transport: i.GetProtocolBinding()})
	}
	if out.Url == "" && len(c.GetSupportedInterfaces()) > 0 {
		i := c.GetSupportedInterfaces()[0]
		out.Url, out.PreferredTransport = i.GetUrl(), i.GetProtocolBinding()
	}
	if caps := c.GetCapabilities(); caps != nil {
		out.Capabilities = &pb03.AgentCapabilities{Streaming: caps.GetStreaming(), PushNotifications: caps.GetPushNotifications()}
		for _, e := range caps.GetExtensions() {
			out.Capabilities.Extensions = append(out.Capabilities.Extensions, &pb03.AgentExtension{
				Uri: e.GetUri(), Description: e.GetDescription(), Required: e.GetRequired(), Params: e.GetParams()})
		}
	}
	if len(c.GetSecuritySchemes()) > 0 {
		out.SecuritySchemes = map[string]*pb03.SecurityScheme{}
		for k, s := range c.GetSecuritySchemes() {
			out.SecuritySchemes[k] = schemeToV03(s)
		}
	}
	out.Security = securityToV03(c.GetSecurityRequirements())
	for _, s := range c.GetSkills() {
		out.Skills = append(out.Skills, &pb03.AgentSkill{Id: s.GetId(), Name: s.GetName(), Description: s.GetDescription(),
			Tags: s.GetTags(), Examples: s.GetExamples(), InputModes: s.GetInputModes(), OutputModes: s.GetOutputModes(),
			Security: securityToV03(s.GetSecurityRequirements())})
	}
	return out
}

func securityToV03(reqs []*pb.SecurityRequirement) []*pb03.Security {
	var out []*pb03.Security
	for _, r := range reqs {
		s := &pb03.Security{Schemes: map[string]*pb03.StringList{}}
		for k, l := range r.GetSchemes() {
			s.Schemes[k] = &pb03.StringList{List: l.GetList()}
		}
		out = append(out, s)
	}
	return out
}

func schemeToV03(s *pb.SecurityScheme) *pb03.SecurityScheme {
	switch v := s.GetScheme().(type) {
	case *pb.SecurityScheme_ApiKeySecurityScheme:
		return &pb03.SecurityScheme{Scheme: &pb03.SecurityScheme_ApiKeySecurityScheme{ApiKeySecurityScheme: &pb03.APIKeySecurityScheme{
			Description: v.ApiKeySecurityScheme.GetDescription(), Location: v.ApiKeySecurityScheme.GetLocation(), Name: v.ApiKeySecurityScheme.GetName()}}}
	case *pb.SecurityScheme_HttpAuthSecurityScheme:
		return &pb03.SecurityScheme{Scheme: &pb03.SecurityScheme_HttpAuthSecurityScheme{HttpAuthSecurityScheme: &pb03.HTTPAuthSecurityScheme{
			Description: v.HttpAuthSecurityScheme.GetDescription(), Scheme: v.HttpAuthSecurityScheme.GetScheme(), BearerFormat: v.HttpAuthSecurityScheme.GetBearerFormat()}}}
	case *pb.SecurityScheme_OpenIdConnectSecurityScheme:
		return &pb03.SecurityScheme{Scheme: &pb03.SecurityScheme_OpenIdConnectSecurityScheme{OpenIdConnectSecurityScheme: &pb03.OpenIdConnectSecurityScheme{
			Description: v.OpenIdConnectSecurityScheme.GetDescription(), OpenIdConnectUrl: v.OpenIdConnectSecurityScheme.GetOpenIdConnectUrl()}}}
	case *pb.SecurityScheme_MtlsSecurityScheme:
		return &pb03.SecurityScheme{Scheme: &pb03.SecurityScheme_MtlsSecurityScheme{MtlsSecurityScheme: &pb03.MutualTlsSecurityScheme{
			Description: v.MtlsSecurityScheme.GetDescription()}}}
	case *pb.SecurityScheme_Oauth2SecurityScheme:
		o := v.Oauth2SecurityScheme
		flows := &pb03.OAuthFlows{}
		switch f := o.GetFlows().GetFlow().(type) {
		case *pb.OAuthFlows_AuthorizationCode:
			flows.Flow = &pb03.OAuthFlows_AuthorizationCode{AuthorizationCode: &pb03.AuthorizationCodeOAuthFlow{
				AuthorizationUrl: f.AuthorizationCode.GetAuthorizationUrl(), TokenUrl: f.AuthorizationCode.GetTokenUrl(),
				RefreshUrl: f.AuthorizationCode.GetRefreshUrl(), Scopes: f.AuthorizationCode.GetScopes()}}
		case *pb.OAuthFlows_ClientCredentials:
			flows.Flow = &pb03.OAuthFlows_ClientCredentials{ClientCredentials: &pb03.ClientCredentialsOAuthFlow{
				TokenUrl: f.ClientCredentials.GetTokenUrl(), RefreshUrl: f.ClientCredentials.GetRefreshUrl(), Scopes: f.ClientCredentials.GetScopes()}}
		case *pb.OAuthFlows_Implicit:
			flows.Flow = &pb03.OAuthFlows_Implicit{Implicit: &pb03.ImplicitOAuthFlow{
				AuthorizationUrl: f.Implicit.GetAuthorizationUrl(), RefreshUrl: f.Implicit.GetRefreshUrl(), Scopes: f.Implicit.GetScopes()}}
		case *pb.OAuthFlows_Password:
			flows.Flow = &pb03.OAuthFlows_Password{Password: &pb03.PasswordOAuthFlow{
				TokenUrl: f.Password.GetTokenUrl(), RefreshUrl: f.Password.GetRefreshUrl(), Scopes: f.Password.GetScopes()}}
		}
		return &pb03.SecurityScheme{Scheme: &pb03.SecurityScheme_Oauth2SecurityScheme{Oauth2SecurityScheme: &pb03.OAuth2SecurityScheme{
			Description: o.GetDescription(), Flows: flows, Oauth2MetadataUrl: o.GetOauth2MetadataUrl()}}}
	}
	return &pb03.SecurityScheme{}
}
