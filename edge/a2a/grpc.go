package a2a

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/mcpv2/mcpv2/edge"
	pb "github.com/mcpv2/mcpv2/edge/a2a/a2apb"
	pb03 "github.com/mcpv2/mcpv2/edge/a2a/a2apb03"
	"github.com/mcpv2/mcpv2/protocol"
)

// The gRPC binding: the services lf.a2a.v1.A2AService (A2A 1.0) and
// a2a.v1.A2AService (A2A 0.3) on the edge's port, chosen by path as gRPC
// names its calls, over HTTP/2 (h2c or TLS). Every call passes the edge's
// chain first (credential from the authorization metadata, limits, an
// in-flight or stream slot), as every caller of the face does; the edge's
// refusals reach the client as gRPC statuses. A call then runs in its
// v1.0 form on the face's one task engine: the request's ProtoJSON is the
// v1.0 JSON-RPC params, the v1.0 result's JSON is the response's
// ProtoJSON; a v0.3 call is converted to v1.0 and back (v03pb.go).
const (
	// GRPCServiceV1 and GRPCServiceV03 are the path prefixes of the two
	// services.
	GRPCServiceV1  = "/" + "lf.a2a.v1.A2AService" + "/"
	GRPCServiceV03 = "/" + "a2a.v1.A2AService" + "/"
	// TenantMetadata is the gRPC metadata that names the mesh peer a call
	// goes to (its PeerID) when the request has no tenant field (v0.3 has
	// none); the v1.0 tenant field wins.
	TenantMetadata = "a2a-tenant"
	// LastEventMetadata is the gRPC metadata of a resubscribe
	// (SubscribeToTask, TaskSubscription): the sequence number of the last
	// event the client saw ("mcpv2/seq" of the event's metadata), as SSE's
	// Last-Event-ID.
	LastEventMetadata = "last-event-id"
)

// grpcTarget is the gRPC target (host:port) of a card's base URL
// (http(s)://host:port, or …/peers/PEERID on another node's edge), and the
// tenant that names the peer there ("" for the node's own edge).
func grpcTarget(base string) (target, tenant string) {
	u, err := url.Parse(base)
	if err != nil {
		return base, ""
	}
	host := u.Host
	if u.Port() == "" {
		host += map[string]string{"https": ":443", "http": ":80"}[u.Scheme]
	}
	if p, ok := strings.CutPrefix(u.Path, "/peers/"); ok {
		tenant = p
	}
	return host, tenant
}

// grpcInterfaces are the v1.0 card's supportedInterfaces of the gRPC
// binding, both versions: url the edge's host:port, tenant the PeerID of a
// peer behind it.
func grpcInterfaces(base string) []any {
	target, tenant := grpcTarget(base)
	var out []any
	for _, v := range []string{"1.0", "0.3"} {
		i := map[string]any{"url": target, "protocolBinding": "GRPC", "protocolVersion": v}
		if tenant != "" {
			i["tenant"] = tenant
		}
		out = append(out, i)
	}
	return out
}

// grpcInterfaceV03 is the v0.3 card's additionalInterfaces entry of the
// gRPC binding (a peer behind the edge is named by the a2a-tenant
// metadata, which v0.3 cards cannot say).
func grpcInterfaceV03(base string) any {
	target, _ := grpcTarget(base)
	return map[string]any{"url": target, "transport": "GRPC"}
}

// grpcCallKey is the context key of a gRPC call's grpcCall.
type grpcCallKey struct{}

// grpcCall is what the HTTP side decided of a gRPC call: the face it goes
// to (the node's, or a mesh peer's) and its caller.
type grpcCall struct {
	f *Face
	c protocol.Caller
}

// newGRPCServer is the gRPC server of the face's two services: messages
// capped at the edge's body cap both ways; its Stop (Face.Close) waits for
// the calls it cancels.
func newGRPCServer(maxMsg int64) *grpc.Server {
	n := int(min(maxMsg, 1<<30))
	s := grpc.NewServer(grpc.MaxRecvMsgSize(n), grpc.MaxSendMsgSize(n), grpc.WaitForHandlers(true),
		grpc.UnknownServiceHandler(grpcUnknown))
	pb.RegisterA2AServiceServer(s, grpcV1{})
	pb03.RegisterA2AServiceServer(s, grpcV03{})
	return s
}

// mountGRPC serves the two services on e's Mux behind the edge's chain,
// with refusals as gRPC statuses; a streaming call holds a stream slot.
func (f *Face) mountGRPC(e *edge.Server) {
	f.grpc = newGRPCServer(e.MaxBody())
	standing := func(r *http.Request) bool {
		m := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		return m == "SendStreamingMessage" || m == "SubscribeToTask" || m == "TaskSubscription"
	}
	h := e.AuthenticatedFace([]string{http.MethodPost}, standing, f.serveGRPC, edge.WithRefusalWriter(writeGRPCRefusal))
	// gRPC is chosen by content type (HandleGRPC): any service path, an
	// unknown one answered UNIMPLEMENTED by the server; the two service
	// paths stay on the mux too, where a request that is not gRPC is told
	// what to send.
	f.grpcHandler = h
	e.HandleGRPC(h)
	e.Mux().Handle(GRPCServiceV1, h)
	e.Mux().Handle(GRPCServiceV03, h)
}

// serveGRPC serves one gRPC call that the edge let through as c: it reads
// the request message (capped by the edge) to find the tenant, and serves
// the call on the node's face, or on the face of the mesh peer the tenant
// names through the edge's peer machinery (gateway limit, face caps).
func (f *Face) serveGRPC(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	if ct := r.Header.Get("Content-Type"); r.ProtoMajor != 2 || !strings.HasPrefix(ct, "application/grpc") {
		f.e.Refuse(w, r, http.StatusUnsupportedMediaType, protocol.Errorf(protocol.CodeInvalidRequest,
			"invalid request: %s is the A2A gRPC binding: send gRPC (HTTP/2, Content-Type application/grpc), not %q over HTTP/%d",
			protocol.Clip(r.URL.Path, 80), protocol.Clip(ct, 60), r.ProtoMajor))
		return
	}
	body, ok := f.e.ReadBody(w, r)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	tenant, perr := grpcTenant(r, body)
	if perr != nil {
		f.e.Refuse(w, r, http.StatusBadRequest, perr)
		return
	}
	if tenant == "" {
		f.serveGRPCOn(w, r, c)
		return
	}
	r.SetPathValue("peer", tenant) // the node's own PeerID is served on f
	f.grpcPeer(w, r, c)
}

// serveGRPCOn serves a gRPC call on face g.
func (g *Face) serveGRPCOn(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	c.Via = "a2a"
	ctx := context.WithValue(r.Context(), grpcCallKey{}, grpcCall{f: g, c: c})
	g.grpc.ServeHTTP(w, r.WithContext(ctx))
}

// grpcRequests are the request messages of the calls, by path, for the
// tenant field.
var grpcRequests = map[string]func() proto.Message{
	"SendMessage": func() proto.Message { return new(pb.SendMessageRequest) }, "SendStreamingMessage": func() proto.Message { return new(pb.SendMessageRequest) },
	"GetTask": func() proto.Message { return new(pb.GetTaskRequest) }, "ListTasks": func() proto.Message { return new(pb.ListTasksRequest) },
	"CancelTask": func() proto.Message { return new(pb.CancelTaskRequest) }, "SubscribeToTask": func() proto.Message { return new(pb.SubscribeToTaskRequest) },
	"CreateTaskPushNotificationConfig": func() proto.Message { return new(pb.TaskPushNotificationConfig) },
	"GetTaskPushNotificationConfig":    func() proto.Message { return new(pb.GetTaskPushNotificationConfigRequest) },
	"ListTaskPushNotificationConfigs":  func() proto.Message { return new(pb.ListTaskPushNotificationConfigsRequest) },
	"DeleteTaskPushNotificationConfig": func() proto.Message { return new(pb.DeleteTaskPushNotificationConfigRequest) },
	"GetExtendedAgentCard":             func() proto.Message { return new(pb.GetExtendedAgentCardRequest) },
}

// grpcTenant is the tenant of a gRPC call: the tenant field of a v1.0
// request message, else the a2a-tenant metadata; "" (the node) when it is
// no PeerID. body is the whole
// request stream: one length-prefixed message (every call of A2A sends
// one).
func grpcTenant(r *http.Request, body []byte) (string, *protocol.Error) {
	tenant := ""
	if m, ok := strings.CutPrefix(r.URL.Path, GRPCServiceV1); ok && grpcRequests[m] != nil {
		if len(body) >= 5 {
			if body[0] != 0 {
				return "", protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: a compressed request message is not accepted here (send it uncompressed)")
			}
			n := binary.BigEndian.Uint32(body[1:5])
			if uint64(n) <= uint64(len(body)-5) {
				msg := grpcRequests[m]()
				if err := proto.Unmarshal(body[5:5+n], msg); err != nil {
					return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params: the %s request message does not decode: %s", m, protocol.Clip(err.Error(), 120))
				}
				if fd := msg.ProtoReflect().Descriptor().Fields().ByName("tenant"); fd != nil && fd.Kind() == protoreflect.StringKind {
					tenant = msg.ProtoReflect().Get(fd).String()
				}
			}
		}
	}
	if tenant == "" {
		tenant = strings.TrimSpace(r.Header.Get(TenantMetadata))
	}
	// A tenant that is no PeerID names no peer: the node serves it (the
	// @a2a-js/sdk 1.3.0 gRPC client sends the string "undefined" for a
	// card interface without a tenant).
	if !protocol.LooksLikePeerID(tenant) {
		tenant = ""
	}
	return tenant, nil
}

// writeGRPCRefusal writes a refusal of the edge as a gRPC trailers-only
// response: grpc-status from the HTTP status (statusCode), grpc-message the
// refusal's message, and in grpc-status-details-bin a google.rpc.Status
// whose ErrorInfo (domain mcpv2) names the edge's reason (edgeReason, as
// over HTTP+JSON) and carries the refusal's data (retry_after_ms, the
// credential check that failed …), its HTTP status and its code (mcpv2's
// -32001… as -32000, as the other bindings carry it).
func writeGRPCRefusal(w http.ResponseWriter, _ *http.Request, httpStatus int, perr *protocol.Error) {
	code := statusCode(httpStatus)
	info := edgeInfo(perr)
	info.meta["http_status"], info.meta["code"] = strconv.Itoa(httpStatus), strconv.Itoa(edge.RefusalCode(perr.Code, codeEdgeRefusal))
	st, err := status.New(code, perr.Message).WithDetails(info.proto())
	if err != nil {
		st = status.New(code, perr.Message)
	}
	b, _ := proto.Marshal(st.Proto())
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(int(code)))
	h.Set("Grpc-Message", grpcEncodeMessage(perr.Message))
	h.Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(b))
	w.WriteHeader(http.StatusOK)
}

// grpcEncodeMessage percent-encodes a grpc-message as gRPC over HTTP/2
// has it: bytes outside printable ASCII, and '%'.
func grpcEncodeMessage(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// proto is i as the google.rpc.ErrorInfo message.
func (i errInfo) proto() *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: i.reason, Domain: i.domain, Metadata: i.meta}
}

// grpcError is the gRPC status of an A2A error: its code (wireOf, the
// table every binding answers by), and its google.rpc.ErrorInfo
// (errorInfo) as a detail.
func grpcError(e *rpcError) error {
	code := wireOf(e).grpc
	st, err := status.New(code, e.Message).WithDetails(errorInfo(e).proto())
	if err != nil {
		return status.Error(code, e.Message)
	}
	return st.Err()
}

// grpcBinding answers one gRPC call: it keeps the result or the error for
// the handler to return, and streams events through send.
type grpcBinding struct {
	result any
	err    *rpcError
	send   func(*pb.StreamResponse) error
	ctx    context.Context
}

func (b *grpcBinding) reply(_ *req, result any) { b.result = result }
func (b *grpcBinding) fail(_ *req, e *rpcError) { b.err = e }
func (b *grpcBinding) stream(q *req) eventSink  { return grpcSink{b: b, q: q} }

// grpcSink sends a stream's events as StreamResponse messages.
type grpcSink struct {
	b *grpcBinding
	q *req
}

func (s grpcSink) send(e Event) error {
	if s.b.send == nil {
		return fmt.Errorf("a2a: grpc: %s is not a streaming call", s.q.method)
	}
	out := new(pb.StreamResponse)
	if err := fromJSON(e.v1(), out); err != nil {
		return err
	}
	return s.b.send(out)
}

// ping has nothing to write: HTTP/2 keeps an idle stream open; it reports
// a client that went.
func (s grpcSink) ping() error { return s.b.ctx.Err() }

// fromJSON decodes v, a v1.0 result in JSON form, into the message out.
func fromJSON(v any, out proto.Message) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("a2a: grpc: encode result: %w", err)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, out); err != nil {
		return fmt.Errorf("a2a: grpc: result as %s: %w", out.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// runGRPC runs the v1.0 call method with request in on the call's face,
// decoding its result into out (nil for a stream, whose events go to
// send). It returns the call's gRPC status.
func runGRPC(ctx context.Context, method string, in proto.Message, out proto.Message, send func(*pb.StreamResponse) error) error {
	call, ok := ctx.Value(grpcCallKey{}).(grpcCall)
	if !ok {
		return status.Error(codes.Internal, "a2a: the call did not come through the edge")
	}
	f := call.f
	params, err := protojson.Marshal(in)
	if err != nil {
		return grpcRefused(ctx, rpcErrf(protocol.CodeInvalidParams, "invalid params: %s", protocol.Clip(err.Error(), 200)))
	}
	b := &grpcBinding{send: send, ctx: ctx}
	wire := "1.0"
	if full, _ := grpc.Method(ctx); strings.HasPrefix(full, GRPCServiceV03) { // a v0.3 call, converted to v1.0 (v03pb.go)
		wire = "0.3"
	}
	q := f.newReq(ctx, call.c, b)
	q.v, q.wire, q.method = "1.0", wire, method
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(LastEventMetadata); len(v) > 0 {
			q.lastEventID = v[0]
		}
	}
	f.dispatch(q, methods["1.0"][method], params)
	if b.err != nil {
		return grpcError(b.err)
	}
	if out == nil {
		return nil
	}
	if b.result == nil {
		return status.Errorf(codes.Internal, "a2a: %s answered nothing", method)
	}
	if err := fromJSON(b.result, out); err != nil {
		f.log.Error("a2a: grpc result", "method", method, "err", err)
		return status.Error(codes.Internal, "internal error: the result could not be encoded")
	}
	return nil
}

// --- A2A 1.0

// grpcV1 serves lf.a2a.v1.A2AService.
type grpcV1 struct {
	pb.UnimplementedA2AServiceServer
}

func (grpcV1) SendMessage(ctx context.Context, in *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	out := new(pb.SendMessageResponse)
	return out, runGRPC(ctx, "SendMessage", in, out, nil)
}

func (grpcV1) SendStreamingMessage(in *pb.SendMessageRequest, s grpc.ServerStreamingServer[pb.StreamResponse]) error {
	return runGRPC(s.Context(), "SendStreamingMessage", in, nil, s.Send)
}

func (grpcV1) GetTask(ctx context.Context, in *pb.GetTaskRequest) (*pb.Task, error) {
	out := new(pb.Task)
	return out, runGRPC(ctx, "GetTask", in, out, nil)
}

func (grpcV1) ListTasks(ctx context.Context, in *pb.ListTasksRequest) (*pb.ListTasksResponse, error) {
	out := new(pb.ListTasksResponse)
	return out, runGRPC(ctx, "ListTasks", in, out, nil)
}

func (grpcV1) CancelTask(ctx context.Context, in *pb.CancelTaskRequest) (*pb.Task, error) {
	out := new(pb.Task)
	return out, runGRPC(ctx, "CancelTask", in, out, nil)
}

func (grpcV1) SubscribeToTask(in *pb.SubscribeToTaskRequest, s grpc.ServerStreamingServer[pb.StreamResponse]) error {
	return runGRPC(s.Context(), "SubscribeToTask", in, nil, s.Send)
}

func (grpcV1) CreateTaskPushNotificationConfig(ctx context.Context, in *pb.TaskPushNotificationConfig) (*pb.TaskPushNotificationConfig, error) {
	out := new(pb.TaskPushNotificationConfig)
	return out, runGRPC(ctx, "CreateTaskPushNotificationConfig", in, out, nil)
}

func (grpcV1) GetTaskPushNotificationConfig(ctx context.Context, in *pb.GetTaskPushNotificationConfigRequest) (*pb.TaskPushNotificationConfig, error) {
	out := new(pb.TaskPushNotificationConfig)
	return out, runGRPC(ctx, "GetTaskPushNotificationConfig", in, out, nil)
}

func (grpcV1) ListTaskPushNotificationConfigs(ctx context.Context, in *pb.ListTaskPushNotificationConfigsRequest) (*pb.ListTaskPushNotificationConfigsResponse, error) {
	out := new(pb.ListTaskPushNotificationConfigsResponse)
	return out, runGRPC(ctx, "ListTaskPushNotificationConfigs", in, out, nil)
}

func (grpcV1) DeleteTaskPushNotificationConfig(ctx context.Context, in *pb.DeleteTaskPushNotificationConfigRequest) (*emptypb.Empty, error) {
	out := new(emptypb.Empty)
	return out, runGRPC(ctx, "DeleteTaskPushNotificationConfig", in, out, nil)
}

func (grpcV1) GetExtendedAgentCard(ctx context.Context, in *pb.GetExtendedAgentCardRequest) (*pb.AgentCard, error) {
	out := new(pb.AgentCard)
	return out, runGRPC(ctx, "GetExtendedAgentCard", in, out, nil)
}

// --- A2A 0.3: each call converted to its v1.0 form and back

// grpcV03 serves a2a.v1.A2AService.
type grpcV03 struct {
	pb03.UnimplementedA2AServiceServer
}

// invalidName refuses a v0.3 call whose resource name does not parse,
// with its audit line.
func invalidName(ctx context.Context, err error) error {
	return grpcRefused(ctx, rpcErrf(protocol.CodeInvalidParams, "invalid params: %v", err))
}

// grpcRefused answers a gRPC call refused before it is dispatched with e,
// and writes its audit line, as dispatch does for the calls it answers.
func grpcRefused(ctx context.Context, e *rpcError) error {
	if call, ok := ctx.Value(grpcCallKey{}).(grpcCall); ok {
		name, _ := grpc.Method(ctx)
		name = name[strings.LastIndexByte(name, '/')+1:]
		call.f.b.Audit(ctx, call.c, "a2a "+nonEmpty(name, "?"), &protocol.Error{Code: e.Code, Message: e.Message}, time.Now())
	}
	return grpcError(e)
}

// grpcUnknown answers a call of a method the services do not have
// (grpc.UnknownServiceHandler): UNIMPLEMENTED, with its audit line.
func grpcUnknown(_ any, s grpc.ServerStream) error {
	name, _ := grpc.MethodFromServerStream(s)
	e := rpcErrf(protocol.CodeMethodNotFound, "method not found: %s is not a method of %s or %s", protocol.Clip(name, 120), strings.Trim(GRPCServiceV1, "/"), strings.Trim(GRPCServiceV03, "/"))
	if call, ok := s.Context().Value(grpcCallKey{}).(grpcCall); ok {
		call.f.b.Audit(s.Context(), call.c, "a2a ?", &protocol.Error{Code: e.Code, Message: e.Message}, time.Now())
	}
	return status.Error(codes.Unimplemented, e.Message)
}

func (grpcV03) SendMessage(ctx context.Context, in *pb03.SendMessageRequest) (*pb03.SendMessageResponse, error) {
	out := new(pb.SendMessageResponse)
	if err := runGRPC(ctx, "SendMessage", SendRequestFromV03(in), out, nil); err != nil {
		return nil, err
	}
	return SendResponseToV03(out), nil
}

func (grpcV03) SendStreamingMessage(in *pb03.SendMessageRequest, s grpc.ServerStreamingServer[pb03.StreamResponse]) error {
	return runGRPC(s.Context(), "SendStreamingMessage", SendRequestFromV03(in), nil, func(r *pb.StreamResponse) error {
		return s.Send(StreamResponseToV03(r))
	})
}

func (grpcV03) GetTask(ctx context.Context, in *pb03.GetTaskRequest) (*pb03.Task, error) {
	id, err := TaskIDFromName(in.GetName())
	if err != nil {
		return nil, invalidName(ctx, err)
	}
	r := &pb.GetTaskRequest{Id: id}
	if n := in.GetHistoryLength(); n > 0 {
		r.HistoryLength = &n
	}
	out := new(pb.Task)
	if err := runGRPC(ctx, "GetTask", r, out, nil); err != nil {
		return nil, err
	}
	return TaskToV03(out), nil
}

func (grpcV03) CancelTask(ctx context.Context, in *pb03.CancelTaskRequest) (*pb03.Task, error) {
	id, err := TaskIDFromName(in.GetName())
	if err != nil {
		return nil, invalidName(ctx, err)
	}
	out := new(pb.Task)
	if err := runGRPC(ctx, "CancelTask", &pb.CancelTaskRequest{Id: id}, out, nil); err != nil {
		return nil, err
	}
	return TaskToV03(out), nil
}

func (grpcV03) TaskSubscription(in *pb03.TaskSubscriptionRequest, s grpc.ServerStreamingServer[pb03.StreamResponse]) error {
	id, err := TaskIDFromName(in.GetName())
	if err != nil {
		return invalidName(s.Context(), err)
	}
	return runGRPC(s.Context(), "SubscribeToTask", &pb.SubscribeToTaskRequest{Id: id}, nil, func(r *pb.StreamResponse) error {
		return s.Send(StreamResponseToV03(r))
	})
}

func (grpcV03) CreateTaskPushNotificationConfig(ctx context.Context, in *pb03.CreateTaskPushNotificationConfigRequest) (*pb03.TaskPushNotificationConfig, error) {
	r, err := PushConfigFromV03(in)
	if err != nil {
		return nil, invalidName(ctx, err)
	}
	out := new(pb.TaskPushNotificationConfig)
	if err := runGRPC(ctx, "CreateTaskPushNotificationConfig", r, out, nil); err != nil {
		return nil, err
	}
	return PushConfigToV03(out), nil
}

func (grpcV03) GetTaskPushNotificationConfig(ctx context.Context, in *pb03.GetTaskPushNotificationConfigRequest) (*pb03.TaskPushNotificationConfig, error) {
	task, id, err := PushNameParts(in.GetName())
	if err != nil {
		return nil, invalidName(ctx, err)
	}
	out := new(pb.TaskPushNotificationConfig)
	if err := runGRPC(ctx, "GetTaskPushNotificationConfig", &pb.GetTaskPushNotificationConfigRequest{TaskId: task, Id: id}, out, nil); err != nil {
		return nil, err
	}
	return PushConfigToV03(out), nil
}

func (grpcV03) ListTaskPushNotificationConfig(ctx context.Context, in *pb03.ListTaskPushNotificationConfigRequest) (*pb03.ListTaskPushNotificationConfigResponse, error) {
	task, err := TaskIDFromName(in.GetParent())
	if err != nil {
		return nil, invalidName(ctx, err)
	}
	out := new(pb.ListTaskPushNotificationConfigsResponse)
	r := &pb.ListTaskPushNotificationConfigsRequest{TaskId: task, PageSize: in.GetPageSize(), PageToken: in.GetPageToken()}
	if err := runGRPC(ctx, "ListTaskPushNotificationConfigs", r, out, nil); err != nil {
		return nil, err
	}
	res := &pb03.ListTaskPushNotificationConfigResponse{NextPageToken: out.GetNextPageToken()}
	for _, c := range out.GetConfigs() {
		res.Configs = append(res.Configs, PushConfigToV03(c))
	}
	return res, nil
}

func (grpcV03) DeleteTaskPushNotificationConfig(ctx context.Context, in *pb03.DeleteTaskPushNotificationConfigRequest) (*emptypb.Empty, error) {
	task, id, err := PushNameParts(in.GetName())
	if err != nil {
		return nil, invalidName(ctx, err)
	}
	out := new(emptypb.Empty)
	return out, runGRPC(ctx, "DeleteTaskPushNotificationConfig", &pb.DeleteTaskPushNotificationConfigRequest{TaskId: task, Id: id}, out, nil)
}

// GetAgentCard answers the v0.3 card: the node's extended card for the
// caller (the public card for an anonymous one), in v0.3 form. A mesh
// peer's face (a2a-tenant), which has no extended card
// (FAILED_PRECONDITION), answers that peer's own card, as its well-known
// URL under /peers/{peer} does, or NOT_FOUND when the peer does not give
// it: never this node's card.
func (grpcV03) GetAgentCard(ctx context.Context, _ *pb03.GetAgentCardRequest) (*pb03.AgentCard, error) {
	out := new(pb.AgentCard)
	err := runGRPC(ctx, "GetExtendedAgentCard", &pb.GetExtendedAgentCardRequest{}, out, nil)
	if err == nil {
		return CardToV03(out), nil
	}
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition {
		return nil, err
	}
	call, _ := ctx.Value(grpcCallKey{}).(grpcCall)
	pf, ok := call.f.b.(peerBackend) // only a peer's face answers FAILED_PRECONDITION (extendedCard)
	if !ok {
		return nil, err
	}
	return call.f.grpcPeerCard(ctx, call.c, pf.peer)
}

// grpcPeerCard is mesh peer peer's own signed card (Face.peerCard, as
// servePeerCard fetches it), its URLs under the edge's advertised one, in
// v0.3 form, with the call's audit line; NOT_FOUND when the peer does not
// give it.
func (f *Face) grpcPeerCard(ctx context.Context, c protocol.Caller, peer string) (*pb03.AgentCard, error) {
	start := time.Now()
	raw, perr := f.peerCard(ctx, c, peer, f.advertisedBase()+"/peers/"+peer, "1.0")
	if perr != nil {
		f.b.Audit(ctx, c, "a2a peer card", perr, start)
		return nil, status.Errorf(codes.NotFound, "the card of mesh peer %s could not be had: %s", peer, protocol.Clip(perr.Message, 200))
	}
	out := new(pb.AgentCard)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, out); err != nil {
		perr := protocol.Errorf(protocol.CodeInternal, "the card of mesh peer %s is not an A2A 1.0 card: %s", peer, protocol.Clip(err.Error(), 200))
		f.b.Audit(ctx, c, "a2a peer card", perr, start)
		return nil, status.Error(codes.NotFound, perr.Message)
	}
	f.b.Audit(ctx, c, "a2a peer card", nil, start)
	return CardToV03(out), nil
}

// GRPCListener serves the face's gRPC binding on an address of its own
// (--a2a-grpc), in the clear over HTTP/2 (h2c), through the same edge
// chain and the same HTTP server configuration (edge.Server.HTTPServer:
// timeouts, streams per connection) as the edge's port. ListenGRPC starts
// it; Close stops it.
type GRPCListener struct {
	srv    *http.Server
	ln     net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup // the Serve goroutine
	calls  sync.WaitGroup // the handlers running
	mu     sync.Mutex
	closed bool
}

// ListenGRPC listens on addr (host:port) and serves the face's gRPC
// binding there until Close. Call after Mount.
func (f *Face) ListenGRPC(addr string) (*GRPCListener, error) {
	if f.grpcHandler == nil {
		return nil, errors.New("a2a: listen grpc: the face is not mounted on an edge")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("a2a: --a2a-grpc %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &GRPCListener{ln: ln, cancel: cancel}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.calls.Add(1)
		defer l.calls.Done()
		f.grpcHandler.ServeHTTP(w, r)
	})
	l.srv = f.e.HTTPServer(ctx, h)
	var p http.Protocols // gRPC is HTTP/2 only
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	l.srv.Protocols = &p
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.log.Error("a2a: gRPC listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return l, nil
}

// Addr is the address the listener is bound to.
func (l *GRPCListener) Addr() net.Addr { return l.ln.Addr() }

// Close stops the listener: the calls in flight are canceled (their
// streams end, their connections close), and it waits for them and for
// its goroutine, so that the face may be closed after it. A second Close
// returns net.ErrClosed.
func (l *GRPCListener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return net.ErrClosed
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	err := l.srv.Close()
	l.wg.Wait()
	l.calls.Wait()
	return err
}
