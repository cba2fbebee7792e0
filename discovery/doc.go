// Package discovery finds mcpv2 agents: the project's own Kademlia DHT
// (protocol /mcpv2/kad/1.0.0), signed agent-card records and their validator,
// provider records for every skill name and tag, the ranking of find results
// (SPEC §4), a routing-table peer cache that survives restarts, and mDNS on
// the local network.
//
// A card is published as a libp2p signed envelope (domain [CardDomain],
// payload type [CardCodec], payload the card's JSON) under the DHT key
// [CardKey](peer), "/mcpv2card/<PeerID>". [CardValidator] refuses, on every
// put and every get, a key that does not name a PeerID, a value over
// [MaxCardSize], an envelope that does not verify, a signer that is not the
// key's peer, and a card whose peer_id is not the key's peer; among valid
// records it prefers the highest seq.
//
// Each skill name and each tag of a published card is announced as a
// provider record of [SkillCID](name) and [TagCID](tag). [Discovery.Find]
// looks up the providers of both CIDs of a query, fetches and verifies their
// cards, and ranks them.
//
// The package imports only protocol and transport of this project.
package discovery
