package transport

import (
	"net"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

func TestSubtractNet(t *testing.T) {
	_, ten, _ := net.ParseCIDR("10.0.0.0/8")
	_, cut, _ := net.ParseCIDR("10.77.0.0/16")
	got := subtract(ten, cut)
	if len(got) != 8 {
		t.Fatalf("want 8 blocks, got %v", got)
	}
	for _, probe := range []string{"10.0.0.1", "10.76.255.255", "10.78.0.0", "10.255.255.255", "10.128.0.1"} {
		in := false
		for _, n := range got {
			in = in || n.Contains(net.ParseIP(probe))
		}
		if !in {
			t.Errorf("%s lost from 10/8 minus 10.77/16: %v", probe, got)
		}
	}
	for _, n := range got {
		if n.Contains(net.ParseIP("10.77.0.10")) || n.Contains(net.ParseIP("10.77.255.1")) {
			t.Errorf("%v still holds the cut range", n)
		}
	}
	_, other, _ := net.ParseCIDR("192.168.0.0/16")
	if got := subtract(other, cut); len(got) != 1 || got[0] != other {
		t.Errorf("unrelated range changed: %v", got)
	}
	_, big, _ := net.ParseCIDR("10.0.0.0/7")
	if got := subtract(ten, big); len(got) != 0 {
		t.Errorf("covering cut must remove the range: %v", got)
	}
}

func TestAllowRoutable(t *testing.T) {
	saved4 := manet.Private4
	t.Cleanup(func() { manet.Private4 = saved4 })
	lab := ma.StringCast("/ip4/10.77.0.10/tcp/4001")
	other := ma.StringCast("/ip4/10.78.1.2/tcp/4001")
	if manet.IsPublicAddr(lab) {
		t.Fatal("10.77.0.10 public before AllowRoutable")
	}
	if err := AllowRoutable([]string{"10.77.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	if !manet.IsPublicAddr(lab) {
		t.Error("10.77.0.10 still private")
	}
	if manet.IsPublicAddr(other) {
		t.Error("10.78.1.2 became public")
	}
	for _, bad := range []string{"10.77.0.0", "fd00:77::/32"} {
		if err := AllowRoutable([]string{bad}); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}
