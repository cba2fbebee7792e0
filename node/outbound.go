package node

import (
	"net/http"

	"github.com/mcpv2/mcpv2/internal/netscope"
)

// OutboundClient is the HTTP client of the node's requests to the world
// outside the mesh (issue 23: a2a skills, agent discovery, health checks):
// every connection it makes, redirects included, keeps to the outbound
// scope of Config.OutboundAllow (internal/netscope: no loopback,
// link-local, private, CGNAT, reserved, unspecified or multicast target,
// nor a NAT64/6to4 address carrying one, unless
// allowed). No proxy, no overall timeout (callers bound their requests
// with their context). One client for the node's life, so that its
// connections are reused.
func (n *Node) OutboundClient() *http.Client {
	n.outboundOnce.Do(func() { n.outbound = netscope.New(n.cfg.OutboundAllow).Client(0) })
	return n.outbound
}
