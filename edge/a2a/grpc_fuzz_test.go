package a2a

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/mcpv2/mcpv2/edge/a2a/a2apb"
)

// FuzzWireTenant: the tenant that wireString reads from a request message
// without decoding it is the one a full decode finds, for every message
// that decodes; never a panic.
func FuzzWireTenant(f *testing.F) {
	for _, m := range []*pb.SendMessageRequest{
		{},
		{Tenant: "12D3KooWQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQmQm"},
		{Tenant: "t", Message: &pb.Message{MessageId: "m", ContextId: "c", Parts: []*pb.Part{{Content: &pb.Part_Text{Text: "hello"}}}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 'a'})            // a tenant cut short
	f.Add([]byte{0x0a, 0x01, 'a', 0x0a, 0x00}) // two tenants: the last wins
	f.Add([]byte{0x0a, 0x01, 0xff})            // not UTF-8
	num := grpcTenantFields["SendMessage"]
	if num == 0 {
		f.Fatal("SendMessageRequest has no tenant field")
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := wireString(b, num)
		var m pb.SendMessageRequest
		if proto.Unmarshal(b, &m) != nil {
			return // refused by the scan, or by the gRPC server's decode after it
		}
		if err != nil {
			t.Fatalf("a message that decodes is refused: %v", err)
		}
		if got != m.GetTenant() {
			t.Fatalf("tenant %q, the decode's %q", got, m.GetTenant())
		}
	})
}
