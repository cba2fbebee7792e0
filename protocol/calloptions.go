package protocol

// CallOptions adjust one call of a client: node.Client and edge.Client
// (CallSkill, CallMethod), and node.Dialer, which routes an address to one
// of them, all take it. The zero value is a plain call.
type CallOptions struct {
	// Provider is the slot's context.provider (claude, openai, gemini,
	// deepseek); empty: none, the peer's default.
	Provider string
	// Session is the session token the call presents in place of the
	// client's own: on the mesh a mesh session token (the slot's
	// context.session), through an HTTP edge a session of that edge (in
	// place of the address's sessionId or a cached one). Empty: the
	// client's own, minted with its secret or fetched from the edge.
	Session string
}
