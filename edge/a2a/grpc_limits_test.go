package a2a_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	pb "github.com/mcpv2/mcpv2/edge/a2a/a2apb"
	pb03 "github.com/mcpv2/mcpv2/edge/a2a/a2apb03"
)

// h2MaxStreams is the SETTINGS_MAX_CONCURRENT_STREAMS an HTTP/2 server at
// addr announces to an h2c client (prior knowledge): the first frame a
// server sends is its SETTINGS.
func h2MaxStreams(t *testing.T, addr string) uint32 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	// The client preface, then an empty SETTINGS frame.
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var hdr [9]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		t.Fatalf("%s: no HTTP/2 SETTINGS frame: %v", addr, err)
	}
	n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	if hdr[3] != 0x4 || n%6 != 0 {
		t.Fatalf("%s: the first frame is of type %d, %d bytes; want SETTINGS", addr, hdr[3], n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 6 {
		if binary.BigEndian.Uint16(payload[i:]) == 0x3 {
			return binary.BigEndian.Uint32(payload[i+2:])
		}
	}
	t.Fatalf("%s: SETTINGS without MAX_CONCURRENT_STREAMS (unlimited)", addr)
	return 0
}

// TestGRPCSlowBodies: one HTTP/2 connection holds at most half of the
// edge's in-flight slots, on the edge's port and on --a2a-grpc (one server
// configuration for both): a client that opens streams whose bodies never
// end does not make every other caller busy.
func TestGRPCSlowBodies(t *testing.T) {
	const maxInFlight = 8
	reg := prometheus.NewRegistry()
	r := newRigEdge(t, nil, func(c *edge.Config) { c.MaxInFlight, c.Metrics = maxInFlight, reg }, nil)
	l, err := r.face.ListenGRPC("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, addr := range []string{l.Addr().String(), r.base[len("http://"):]} {
		if got := h2MaxStreams(t, addr); got == 0 || got > maxInFlight/2 {
			t.Errorf("%s announces %d concurrent streams per connection; want 1…%d (half the edge's %d in-flight slots)", addr, got, maxInFlight/2, maxInFlight)
		}
	}
	inFlight := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "mcpv2_edge_requests_in_flight" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no mcpv2_edge_requests_in_flight")
		return 0
	}

	// One connection (the client keeps to the server's stream cap) opens
	// as many GetTask streams as the edge has slots; each writes one byte
	// of its message and stops. The first half are opened one by one, each
	// once the last holds its slot; the rest at once: the server must keep
	// them out (the client waits for a stream, or gives up on one the
	// server refused).
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: true}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	tok := r.token()
	var pws []*io.PipeWriter
	var wg sync.WaitGroup
	defer func() {
		for _, pw := range pws {
			pw.Close()
		}
		wg.Wait()
	}()
	open := func() {
		pr, pw := io.Pipe()
		pws = append(pws, pw)
		req, _ := http.NewRequest("POST", "http://"+l.Addr().String()+"/lf.a2a.v1.A2AService/GetTask", pr)
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Authorization", "Bearer "+tok)
		wg.Add(2)
		go func() {
			defer wg.Done()
			if resp, err := hc.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		go func() {
			defer wg.Done()
			pw.Write([]byte{0})
		}()
	}
	for i := 1; i <= maxInFlight/2; i++ {
		open()
		deadline := time.Now().Add(10 * time.Second)
		for inFlight() < float64(i) {
			if time.Now().After(deadline) {
				t.Fatalf("slow stream %d holds no in-flight slot after 10 s (%v held)", i, inFlight())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range maxInFlight - maxInFlight/2 {
		open()
	}
	// Give the rest a moment to arrive, should the server let them.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && inFlight() < maxInFlight; {
		time.Sleep(10 * time.Millisecond)
	}
	if got := inFlight(); got > maxInFlight/2 {
		t.Errorf("one connection holds %v of the edge's %d in-flight slots", got, maxInFlight)
	}
	_, err = pb.NewA2AServiceClient(r.grpcConn(t)).SendMessage(withToken(t.Context(), r.token()), &pb.SendMessageRequest{Message: skillMsg("ping", nil)})
	if err != nil {
		t.Fatalf("another caller on the edge's port, while one connection holds slow streams: %v", err)
	}
}

// TestGRPCv03PushIsV03: a push config a v0.3 gRPC client sets (here in
// its SendMessage) runs as v1.0 inside, but is kept as the client's: its
// webhook gets the task in v0.3 form (application/json), not a v1.0
// StreamResponse.
func TestGRPCv03PushIsV03(t *testing.T) {
	r := newRigOpts(t, nil, nil, a2a.WithOutboundAllow(loopback))
	rc := newReceiver(t)
	c := pb03.NewA2AServiceClient(r.grpcConn(t))
	d, _ := structpb.NewStruct(map[string]any{"skill": "ping", "arguments": map[string]any{"payload": "x"}})
	m := &pb03.Message{MessageId: "m-push03", Role: pb03.Role_ROLE_USER, Content: []*pb03.Part{{Part: &pb03.Part_Data{Data: &pb03.DataPart{Data: d}}}}}
	res, err := c.SendMessage(withToken(t.Context(), r.token()), &pb03.SendMessageRequest{Request: m,
		Configuration: &pb03.SendMessageConfiguration{PushNotification: &pb03.PushNotificationConfig{Url: rc.srv.URL + "/hook", Token: "t03"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := rc.waitFor(t, 1)[0]
	var task struct {
		ID     string `json:"id"`
		Kind   string `json:"kind"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.Unmarshal(p.body, &task); err != nil || p.ctype != "application/json" || task.Kind != "task" || task.ID != res.GetTask().GetId() || task.Status.State == "" {
		t.Fatalf("a v0.3 gRPC client's webhook got %s (Content-Type %s); want its task in v0.3 form", p.body, p.ctype)
	}
}

// TestBusyAlikeEverywhere: a face that runs its most tasks is busy in
// every binding alike (one table): gRPC UNAVAILABLE and HTTP+JSON 503
// UNAVAILABLE with Retry-After, both with the ErrorInfo reason BUSY; the
// A2A code (-32603) alone would say INTERNAL.
func TestBusyAlikeEverywhere(t *testing.T) {
	r := newRigOpts(t, nil, nil, a2a.WithMaxRunning(1))
	c := pb.NewA2AServiceClient(r.grpcConn(t))
	ctx := withToken(t.Context(), r.token())
	st, err := c.SendStreamingMessage(ctx, &pb.SendMessageRequest{Message: skillMsg("slow", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the task runs
		t.Fatal(err)
	}
	_, err = c.SendMessage(ctx, &pb.SendMessageRequest{Message: skillMsg("ping", nil)})
	if code, reason, _ := errInfo(t, err); code != codes.Unavailable || reason != "BUSY" {
		t.Errorf("gRPC, busy: %v %q: %v", code, reason, err)
	}
	a := rest(t, r.token(), "POST", r.base+a2a.RESTPath+"/message:send", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})}, v1)
	if s := a.rpcStatus(t); a.status != 503 || s.Status != "UNAVAILABLE" || s.Details[0].Reason != "BUSY" || a.header.Get("Retry-After") == "" {
		t.Errorf("HTTP+JSON, busy: %d %.300s", a.status, a.body)
	}
	close(r.release)
}

// TestGRPCRefusedAudited: gRPC calls refused before they are dispatched (a
// v0.3 resource name that does not parse, a method the services do not
// have) write their audit line, as JSON-RPC's and HTTP+JSON's do.
func TestGRPCRefusedAudited(t *testing.T) {
	r := newRig(t, "")
	cc := r.grpcConn(t)
	ctx := withToken(t.Context(), r.token())
	if _, err := pb03.NewA2AServiceClient(cc).GetTask(ctx, &pb03.GetTaskRequest{Name: "not/a/name"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("v0.3 GetTask of a bad name: %v", err)
	}
	err := cc.Invoke(ctx, "/lf.a2a.v1.A2AService/NoSuchMethod", &pb.GetTaskRequest{Id: "x"}, new(pb.Task))
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("an unknown method: %v", err)
	}
	// gRPC is chosen by content type: a service the edge lacks is a gRPC
	// status too (not an HTTP 404 the client cannot read), audited.
	err = cc.Invoke(ctx, "/grpc.health.v1.Health/Check", &pb.GetTaskRequest{Id: "x"}, new(pb.Task))
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("an unknown service: %v", err)
	}
	var badName bool
	unknown := 0
	for _, l := range auditLines(t, r) {
		switch {
		case l["method"] == "a2a GetTask" && l["code"] == float64(-32602):
			badName = true
		case l["method"] == "a2a ?" && l["code"] == float64(-32601):
			unknown++
		}
	}
	if !badName || unknown != 2 {
		t.Errorf("audit lines: bad v0.3 name %v, unknown method and service %d (want 2); lines %v", badName, unknown, auditLines(t, r))
	}
}
