package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/transport"
)

// Peer cache limits.
const (
	// peerCacheVersion is the version of the peer cache file format.
	peerCacheVersion = 1
	// maxCachedPeers caps the peers written to the cache.
	maxCachedPeers = 256
	// maxCachedAddrs caps the addresses kept per cached peer.
	maxCachedAddrs = 16
	// maxPeerCacheFile caps the size of a peer cache file that is read.
	maxPeerCacheFile = 4 << 20
)

// peerCacheFile is the JSON form of the peer cache.
type peerCacheFile struct {
	Version int          `json:"version"`
	Saved   time.Time    `json:"saved"`
	Peers   []cachedPeer `json:"peers"`
}

// cachedPeer is one routing-table peer and its addresses.
type cachedPeer struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
}

// loadPeerCache reads the peer cache at path. A missing, unreadable or
// malformed file yields no peers and is logged; bad entries are skipped.
func loadPeerCache(path string, self peer.ID, log *slog.Logger) []peer.AddrInfo {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		log.Debug("discovery: no peer cache yet", "path", path)
		return nil
	}
	if err != nil {
		log.Warn("discovery: peer cache unreadable", "path", path, "err", err)
		return nil
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxPeerCacheFile+1))
	if err != nil || len(b) > maxPeerCacheFile {
		log.Warn("discovery: peer cache unreadable or too large", "path", path, "err", err, "bytes", len(b))
		return nil
	}
	var pc peerCacheFile
	if err := json.Unmarshal(b, &pc); err != nil || pc.Version != peerCacheVersion {
		log.Warn("discovery: peer cache malformed; ignored", "path", path, "err", err, "version", pc.Version)
		return nil
	}
	var out []peer.AddrInfo
	for _, cp := range pc.Peers {
		id, err := peer.Decode(cp.ID)
		if err != nil || id == self {
			continue
		}
		ai := peer.AddrInfo{ID: id}
		for _, s := range cp.Addrs {
			if a, err := ma.NewMultiaddr(s); err == nil {
				ai.Addrs = append(ai.Addrs, a)
			}
		}
		if len(ai.Addrs) > 0 {
			out = append(out, ai)
		}
	}
	log.Debug("discovery: peer cache read", "path", path, "peers", len(out))
	return out
}

// savePeerCache writes the routing table's peers and their addresses to the
// peer cache, atomically. With no peer to write it keeps the file as it is,
// so that a node closed while offline does not forget the mesh.
func (d *Discovery) savePeerCache() error {
	ids := d.kad.RoutingTable().ListPeers()
	pc := peerCacheFile{Version: peerCacheVersion, Saved: time.Now().UTC()}
	for _, id := range ids {
		if len(pc.Peers) == maxCachedPeers {
			break
		}
		addrs := d.h.Peerstore().Addrs(id)
		if len(addrs) == 0 {
			continue
		}
		cp := cachedPeer{ID: id.String()}
		for _, a := range addrs[:min(len(addrs), maxCachedAddrs)] {
			cp.Addrs = append(cp.Addrs, a.String())
		}
		pc.Peers = append(pc.Peers, cp)
	}
	if len(pc.Peers) == 0 {
		d.log.Debug("discovery: peer cache not written: no routing-table peer", "path", d.cfg.peerCache)
		return nil
	}
	b, err := json.MarshalIndent(pc, "", "  ")
	if err != nil {
		return fmt.Errorf("discovery: peer cache: %w", err)
	}
	if err := transport.WriteFile(d.cfg.peerCache, append(b, '\n')); err != nil {
		return fmt.Errorf("discovery: peer cache: %w", err)
	}
	d.log.Debug("discovery: peer cache written", "path", d.cfg.peerCache, "peers", len(pc.Peers))
	return nil
}

// peerCacheLoop writes the peer cache after each completed announcement
// and every peerCacheEvery, until Close. A node killed (kill -9, a crash,
// a power cut) a minute after it joined still comes back from its cache.
func (d *Discovery) peerCacheLoop() {
	defer d.wg.Done()
	t := time.NewTicker(d.cfg.peerCacheEvery)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		case <-d.announced:
		}
		if err := d.savePeerCache(); err != nil {
			d.log.Warn("discovery: peer cache", "err", err)
		}
	}
}
