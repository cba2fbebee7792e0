package a2a_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcpv2/mcpv2/edge/a2a"
	pb "github.com/mcpv2/mcpv2/edge/a2a/a2apb"
	pb03 "github.com/mcpv2/mcpv2/edge/a2a/a2apb03"
	"github.com/mcpv2/mcpv2/node"
)

// grpcConn is a grpc-go client of the rig's edge over h2c.
func (r *rig) grpcConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(strings.TrimPrefix(r.base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// withToken is ctx with the credential as gRPC metadata, and kv.
func withToken(ctx context.Context, tok string, kv ...string) context.Context {
	if tok != "" {
		kv = append(kv, "authorization", "Bearer "+tok)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func skillMsg(skill string, args map[string]any) *pb.Message {
	d, _ := structpb.NewStruct(map[string]any{"skill": skill, "arguments": args})
	return &pb.Message{MessageId: "m-" + strconv.FormatInt(time.Now().UnixNano(), 36), Role: pb.Role_ROLE_USER,
		Parts: []*pb.Part{{Content: &pb.Part_Data{Data: structpb.NewStructValue(d)}}}}
}

// errInfo is the status code and ErrorInfo reason of err.
func errInfo(t *testing.T, err error) (codes.Code, string, map[string]string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a gRPC status: %v", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason(), info.GetMetadata()
		}
	}
	return st.Code(), "", nil
}

func TestGRPCv1(t *testing.T) {
	r := newRig(t, "")
	c := pb.NewA2AServiceClient(r.grpcConn(t))
	ctx := withToken(t.Context(), r.token())

	res, err := c.SendMessage(ctx, &pb.SendMessageRequest{Message: skillMsg("ping", map[string]any{"payload": "x"})})
	if err != nil {
		t.Fatal(err)
	}
	task := res.GetTask()
	if task.GetStatus().GetState() != pb.TaskState_TASK_STATE_COMPLETED || !strings.Contains(task.String(), "pong") {
		t.Fatalf("send: %v", res)
	}
	got, err := c.GetTask(ctx, &pb.GetTaskRequest{Id: task.GetId()})
	if err != nil || got.GetId() != task.GetId() || len(got.GetArtifacts()) == 0 {
		t.Fatalf("get: %v %v", got, err)
	}
	list, err := c.ListTasks(ctx, &pb.ListTasksRequest{})
	if err != nil || len(list.GetTasks()) != 1 || list.GetTasks()[0].GetId() != task.GetId() || list.GetTotalSize() != 1 {
		t.Fatalf("list: %v %v", list, err)
	}

	// A stream of a task that waits: its events, then cancel ends it.
	s, err := c.SendStreamingMessage(ctx, &pb.SendMessageRequest{Message: skillMsg("slow", nil)})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetTask().GetId()
	if id == "" {
		t.Fatalf("first event is not the task: %v", first)
	}
	seq := first.GetTask().GetMetadata().GetFields()["mcpv2/seq"].GetNumberValue()
	if seq == 0 {
		t.Fatalf("no mcpv2/seq on the first event: %v", first)
	}
	// A resubscribe after the first event replays what came after it.
	sub, err := c.SubscribeToTask(withToken(t.Context(), r.token(), a2a.LastEventMetadata, strconv.Itoa(int(seq))), &pb.SubscribeToTaskRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	// Its first event (the working one, replayed or live) says the server
	// holds the subscription before the cancel, which would otherwise race
	// it to a task with nothing left to subscribe to.
	pre, err := sub.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if pre.GetTask() != nil && pre.GetTask().GetMetadata().GetFields()["mcpv2/seq"].GetNumberValue() <= seq {
		t.Fatalf("the resubscribe replayed an event the client had: %v", pre)
	}
	canceled, err := c.CancelTask(ctx, &pb.CancelTaskRequest{Id: id})
	if err != nil || canceled.GetStatus().GetState() != pb.TaskState_TASK_STATE_CANCELED {
		t.Fatalf("cancel: %v %v", canceled, err)
	}
	for _, stream := range []grpc.ServerStreamingClient[pb.StreamResponse]{s, sub} {
		var last *pb.StreamResponse
		n := 0
		if stream == sub {
			last, n = pre, 1
		}
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.GetTask() != nil && ev.GetTask().GetMetadata().GetFields()["mcpv2/seq"].GetNumberValue() <= seq && stream == sub {
				t.Fatalf("the resubscribe replayed an event the client had: %v", ev)
			}
			last, n = ev, n+1
		}
		if last.GetStatusUpdate().GetStatus().GetState() != pb.TaskState_TASK_STATE_CANCELED || n == 0 {
			t.Fatalf("the stream did not end canceled: %v (%d events)", last, n)
		}
	}

	// A2A errors: a gRPC code and an ErrorInfo of domain a2a-protocol.org.
	_, err = c.GetTask(ctx, &pb.GetTaskRequest{Id: "no-such-task"})
	if code, reason, _ := errInfo(t, err); code != codes.NotFound || reason != "TASK_NOT_FOUND" {
		t.Fatalf("unknown task: %v %s: %v", code, reason, err)
	}
	_, err = c.CancelTask(ctx, &pb.CancelTaskRequest{Id: task.GetId()})
	if code, reason, _ := errInfo(t, err); code != codes.FailedPrecondition || reason != "TASK_NOT_CANCELABLE" {
		t.Fatalf("cancel a completed task: %v %s: %v", code, reason, err)
	}
	sub, err = c.SubscribeToTask(ctx, &pb.SubscribeToTaskRequest{Id: task.GetId()})
	if err == nil {
		_, err = sub.Recv()
	}
	if code, reason, _ := errInfo(t, err); code != codes.FailedPrecondition || reason != "UNSUPPORTED_OPERATION" {
		t.Fatalf("subscribe to a completed task: %v %s: %v", code, reason, err)
	}
	_, err = c.ListTasks(ctx, &pb.ListTasksRequest{PageSize: new(int32(500))})
	if code, reason, _ := errInfo(t, err); code != codes.InvalidArgument || reason != "INVALID_PARAMS" {
		t.Fatalf("page size 500: %v %s: %v", code, reason, err)
	}

	// The edge's refusals are gRPC statuses too.
	_, err = c.GetTask(withToken(t.Context(), "not-a-token"), &pb.GetTaskRequest{Id: task.GetId()})
	if code, reason, meta := errInfo(t, err); code != codes.Unauthenticated || meta["http_status"] != "401" || reason != "INVALID_CREDENTIAL" || meta["code"] != "-32000" {
		t.Fatalf("a bad credential: %v %v: %v", code, meta, err)
	}
	_, err = c.SendMessage(ctx, &pb.SendMessageRequest{Message: skillMsg("ping", map[string]any{"payload": strings.Repeat("x", int(r.e.MaxBody()))})})
	if code, reason, _ := errInfo(t, err); code != codes.ResourceExhausted || reason != "INVALID_REQUEST" {
		t.Fatalf("a message over the edge's cap: %v", err)
	}
	// A tenant that is no PeerID is the node (a2a-js sends "undefined").
	if got, err := c.GetTask(ctx, &pb.GetTaskRequest{Tenant: "undefined", Id: task.GetId()}); err != nil || got.GetId() != task.GetId() {
		t.Fatalf("a tenant that is no PeerID: %v %v", got, err)
	}
	// The card lists the binding: the edge's host:port, both versions.
	host := strings.TrimPrefix(r.base, "http://")
	for _, v := range []string{"1.0", "0.3"} {
		want := `{"protocolBinding":"GRPC","protocolVersion":"` + v + `","url":"` + host + `"}`
		if card := fetchCard(t, r.base+a2a.CardPath, "1.0"); !strings.Contains(string(card), want) {
			t.Fatalf("the v1.0 card does not list %s: %s", want, card)
		}
	}
	if card := fetchCard(t, r.base+a2a.CardPath, "0.3"); !strings.Contains(string(card), `{"transport":"GRPC","url":"`+host+`"}`) {
		t.Fatalf("the v0.3 card does not list gRPC: %s", card)
	}
	// The node's own PeerID as tenant is the node's face.
	if got, err := c.GetTask(ctx, &pb.GetTaskRequest{Tenant: r.n.ID().String(), Id: task.GetId()}); err != nil || got.GetId() != task.GetId() {
		t.Fatalf("own PeerID as tenant: %v %v", got, err)
	}
}

func TestGRPCv03(t *testing.T) {
	r := newRig(t, "")
	c := pb03.NewA2AServiceClient(r.grpcConn(t))
	ctx := withToken(t.Context(), r.token())
	d, _ := structpb.NewStruct(map[string]any{"skill": "ping", "arguments": map[string]any{"payload": "x"}})
	msg03 := func(d *structpb.Struct) *pb03.Message {
		return &pb03.Message{MessageId: "m-" + strconv.FormatInt(time.Now().UnixNano(), 36), Role: pb03.Role_ROLE_USER,
			Content: []*pb03.Part{{Part: &pb03.Part_Data{Data: &pb03.DataPart{Data: d}}}}}
	}
	res, err := c.SendMessage(ctx, &pb03.SendMessageRequest{Request: msg03(d)})
	if err != nil {
		t.Fatal(err)
	}
	task := res.GetTask()
	if task.GetStatus().GetState() != pb03.TaskState_TASK_STATE_COMPLETED || !strings.Contains(task.String(), "pong") {
		t.Fatalf("send: %v", res)
	}
	got, err := c.GetTask(ctx, &pb03.GetTaskRequest{Name: "tasks/" + task.GetId()})
	if err != nil || got.GetId() != task.GetId() {
		t.Fatalf("get: %v %v", got, err)
	}
	if _, err := c.GetTask(ctx, &pb03.GetTaskRequest{Name: task.GetId()}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a name that is not tasks/{id}: %v", err)
	}

	slow, _ := structpb.NewStruct(map[string]any{"skill": "slow"})
	s, err := c.SendStreamingMessage(ctx, &pb03.SendMessageRequest{Request: msg03(slow)})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil || first.GetTask().GetId() == "" {
		t.Fatalf("first event: %v %v", first, err)
	}
	id := first.GetTask().GetId()
	sub, err := c.TaskSubscription(withToken(t.Context(), r.token(), a2a.LastEventMetadata, "0"), &pb03.TaskSubscriptionRequest{Name: "tasks/" + id})
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := sub.Recv() // from event 0: the task's first event again
	if err != nil || replayed.GetTask().GetId() != id {
		t.Fatalf("replay: %v %v", replayed, err)
	}
	canceled, err := c.CancelTask(ctx, &pb03.CancelTaskRequest{Name: "tasks/" + id})
	if err != nil || canceled.GetStatus().GetState() != pb03.TaskState_TASK_STATE_CANCELLED {
		t.Fatalf("cancel: %v %v", canceled, err)
	}
	for _, stream := range []grpc.ServerStreamingClient[pb03.StreamResponse]{s, sub} {
		var last *pb03.StreamResponse
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			last = ev
		}
		if u := last.GetStatusUpdate(); u.GetStatus().GetState() != pb03.TaskState_TASK_STATE_CANCELLED || !u.GetFinal() {
			t.Fatalf("the stream did not end with a final cancelled update: %v", last)
		}
	}
	_, err = c.GetTask(ctx, &pb03.GetTaskRequest{Name: "tasks/nope"})
	if code, reason, _ := errInfo(t, err); code != codes.NotFound || reason != "TASK_NOT_FOUND" {
		t.Fatalf("unknown task: %v %s", code, reason)
	}
	card, err := c.GetAgentCard(ctx, &pb03.GetAgentCardRequest{})
	if err != nil || card.GetName() != "alice" || card.GetProtocolVersion() != "0.3.0" || card.GetUrl() == "" {
		t.Fatalf("card: %v %v", card, err)
	}
	_, err = c.GetTask(withToken(t.Context(), "not-a-token"), &pb03.GetTaskRequest{Name: "tasks/" + id})
	if code, _, _ := errInfo(t, err); code != codes.Unauthenticated {
		t.Fatalf("a bad credential: %v", err)
	}
}

// TestGRPCTenant: the tenant field (v1.0) and the a2a-tenant metadata
// (v0.3) send a call to the face of a mesh peer behind the edge.
func TestGRPCTenant(t *testing.T) {
	r := newRig(t, "")
	b, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret), Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r.n.Host().Peerstore().AddAddrs(b.ID(), b.Host().Addrs(), time.Hour)
	bob := b.ID().String()
	cc := r.grpcConn(t)
	ctx := withToken(t.Context(), r.token())

	c := pb.NewA2AServiceClient(cc)
	res, err := c.SendMessage(ctx, &pb.SendMessageRequest{Tenant: bob, Message: skillMsg("ping", nil)})
	if err != nil || res.GetTask().GetStatus().GetState() != pb.TaskState_TASK_STATE_COMPLETED || !strings.Contains(res.String(), bob) {
		t.Fatalf("ping on bob through alice: %v %v", res, err)
	}
	id := res.GetTask().GetId()
	if got, err := c.GetTask(ctx, &pb.GetTaskRequest{Tenant: bob, Id: id}); err != nil || got.GetId() != id {
		t.Fatalf("get through bob's face: %v %v", got, err)
	}
	// bob's face's tasks are not alice's own face's.
	if _, err := c.GetTask(ctx, &pb.GetTaskRequest{Id: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("bob's task through alice's own face: %v", err)
	}

	c03 := pb03.NewA2AServiceClient(cc)
	if got, err := c03.GetTask(withToken(t.Context(), r.token(), a2a.TenantMetadata, bob), &pb03.GetTaskRequest{Name: "tasks/" + id}); err != nil || got.GetId() != id {
		t.Fatalf("v0.3 get through bob's face (a2a-tenant): %v %v", got, err)
	}
	// bob's card through bob's face: not alice's. bob has no A2A face yet
	// (it answers no card): NOT_FOUND; with one, bob's own card.
	tctx := withToken(t.Context(), r.token(), a2a.TenantMetadata, bob)
	if card, err := c03.GetAgentCard(tctx, &pb03.GetAgentCardRequest{}); status.Code(err) != codes.NotFound {
		t.Fatalf("v0.3 card through bob's face, bob with no card: %v %v", card.GetName(), err)
	}
	fb, err := a2a.New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	b.SetA2ACard(fb.CardFor)
	card, err := c03.GetAgentCard(tctx, &pb03.GetAgentCardRequest{})
	if err != nil || card.GetName() != "bob" || !strings.Contains(card.GetUrl(), "/peers/"+bob) {
		t.Fatalf("v0.3 card through bob's face: %v %v", card, err)
	}
}

// TestGRPCListener: --a2a-grpc serves the same binding, through the same
// chain, on an address of its own.
func TestGRPCListener(t *testing.T) {
	r := newRig(t, "")
	l, err := r.face.ListenGRPC("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := pb.NewA2AServiceClient(cc)
	res, err := c.SendMessage(withToken(t.Context(), r.token()), &pb.SendMessageRequest{Message: skillMsg("ping", nil)})
	if err != nil || res.GetTask().GetStatus().GetState() != pb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("send on the own listener: %v %v", res, err)
	}
	if _, err := c.GetTask(withToken(t.Context(), "not-a-token"), &pb.GetTaskRequest{Id: res.GetTask().GetId()}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a bad credential on the own listener: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}
