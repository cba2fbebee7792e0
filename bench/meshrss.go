package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/sync/errgroup"

	"github.com/mcpv2/mcpv2/bench/internal/lean"
	"github.com/mcpv2/mcpv2/node/localapi"
)

// Row 15: the resident memory per node of a DHT mesh on loopback in which
// half the processes are `mcpv2 node`s and half lean bare hosts with
// kad-dht (bench/bare mesh), all in the one mesh: the bare hosts speak
// mcpv2's DHT (/mcpv2/kad/1.0.0, server mode) and store its card records,
// nothing in an mcpv2 node filters peers by the protocols they run (no
// routing-table or query filter, a connection gater on addresses only), so
// each kind has both in its routing table. Every process joins through
// the two first ones, one of each kind. Once the peer counts settle, the
// median VmRSS of each kind.

// Tuning of the mesh row.
const (
	// meshTarget is row 15's target: mcpv2's median RSS over the bare
	// hosts'.
	meshTarget = 1.3
	// meshStartPar is how many processes start at once.
	meshStartPar = 6
	// meshPollPar is how many processes are asked their peers at once.
	meshPollPar = 16
	// meshSettled is the relative change of the peer total under which
	// the mesh counts as settled once it held for plan.meshStable.
	meshSettled = 0.02
)

// meshKind is the kind of a mesh member.
type meshKind int

const (
	kindMCPV2 meshKind = iota
	kindBare
)

// meshMember is one process of the mesh.
type meshMember struct {
	kind meshKind
	c    *child
	id   string // its PeerID
	dir  string // a node's data dir
	// peers and rt are the last readings (rt: the bare hosts' routing
	// table; the node does not show its own).
	peers, rt int
}

// runMeshRSS measures row 15.
func runMeshRSS(ctx context.Context, e *env, p plan) ([]line, error) {
	nNodes := p.mesh / 2
	nBare := p.mesh - nNodes
	base := filepath.Join(e.dir, "mesh")
	var (
		mu      sync.Mutex
		members []*meshMember
	)
	defer func() {
		for _, m := range members {
			e.procs.kill(m.c)
		}
		_ = os.RemoveAll(base)
	}()
	add := func(m *meshMember) {
		mu.Lock()
		defer mu.Unlock()
		members = append(members, m)
	}
	startNode := func(ctx context.Context, i int, boot []string) (*meshMember, error) {
		dir := filepath.Join(base, fmt.Sprintf("n%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		args := append(nodeArgs(dir), "--dht-mode", "server")
		for _, b := range boot {
			args = append(args, "--bootstrap", b)
		}
		c, err := e.startNode(ctx, fmt.Sprintf("mesh node %d", i), args)
		if err != nil {
			return nil, err
		}
		m := &meshMember{kind: kindMCPV2, c: c, dir: dir, id: c.value("MCPV2_PEER_ID")}
		add(m)
		if m.id == "" {
			return nil, fmt.Errorf("%w: %s's banner has no MCPV2_PEER_ID: %q", errNotReady, c.name, c.lines)
		}
		return m, nil
	}
	startBare := func(ctx context.Context, boot []string) (*meshMember, readyInfo, error) {
		var info readyInfo
		c, err := e.startBare(ctx, "mesh", &info, boot...)
		if err != nil {
			return nil, info, err
		}
		m := &meshMember{kind: kindBare, c: c}
		add(m)
		if len(info.Addrs) > 0 {
			a := info.Addrs[0]
			m.id = a[strings.LastIndex(a, "/p2p/")+len("/p2p/"):]
		}
		if m.id == "" {
			return nil, info, fmt.Errorf("%w: %s's ready line has no /p2p/ address: %v", errNotReady, c.name, info.Addrs)
		}
		return m, info, nil
	}

	// The two roots: a node, then a bare host joined to it.
	root, err := startNode(ctx, 0, nil)
	if err != nil {
		return nil, err
	}
	rootAddr, err := childTCP(root.c)
	if err != nil {
		return nil, err
	}
	rootMA := rootAddr.Multiaddr
	_, bareInfo, err := startBare(ctx, []string{rootMA})
	if err != nil {
		return nil, err
	}
	bareMA, err := bareInfo.addrOf("/tcp/")
	if err != nil {
		return nil, err
	}
	boot := []string{rootMA, bareMA}

	// The rest, the kinds interleaved, a few at a time.
	e.log.Info("starting the mesh", "mcpv2 nodes", nNodes, "bare hosts", nBare)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(meshStartPar)
	for i := 1; i < max(nNodes, nBare); i++ {
		if i < nNodes {
			g.Go(func() error { _, err := startNode(gctx, i, boot); return err })
		}
		if i < nBare {
			g.Go(func() error { _, _, err := startBare(gctx, boot); return err })
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	started := time.Now()
	e.log.Info("mesh started; waiting for the peer counts to settle", "processes", len(members))

	settled, err := settleMesh(ctx, e, p, members, started)
	if err != nil {
		return nil, err
	}
	var rs [2][]memRound
	for _, m := range members {
		if err := m.c.alive(); err != nil {
			return nil, err
		}
		mi, err := procPss(m.c.pid())
		if err != nil {
			return nil, err
		}
		rs[m.kind] = append(rs[m.kind], memRound{idle: mi})
	}
	cen, err := meshCensus(ctx, members)
	if err != nil {
		return nil, err
	}
	idle := func(m memRound) memInfo { return m.idle }
	a, b := medianMem(rs[kindMCPV2], idle), medianMem(rs[kindBare], idle)
	settleText := fmt.Sprintf("settled %s after the last start", settled.Round(time.Second))
	if settled < 0 {
		settleText = fmt.Sprintf("peer counts still moving after %s; measured then", p.meshMax)
	}
	l := line{row: 15, payload: fmt.Sprintf("%d mcpv2 + %d bare, loopback", nNodes, nBare),
		baseline: "bare host + kad-dht in the same mesh, lean binary", aMed: memCell(a), bMed: memCell(b),
		ratio: float64(a.rss) / float64(b.rss), target: fmt.Sprintf("≤ %.1f×", meshTarget)}
	l.judge(true, l.ratio <= meshTarget)
	info := line{row: 15, payload: settleText, baseline: "bare hosts",
		aMed:  fmt.Sprintf("Pss %s; peers %s", fmtMiB(float64(a.pss)), cen.conns[kindMCPV2]),
		bMed:  fmt.Sprintf("Pss %s; peers %s, routing table %s", fmtMiB(float64(b.pss)), cen.conns[kindBare], cen.rt),
		ratio: float64(a.pss) / float64(b.pss), target: "(info)"}
	info.judge(false, true)
	e.log.Info("measured", "row", 15, "mcpv2", l.aMed, "bare", l.bMed, "ratio", fmtRatio(l.ratio), "settle", settleText,
		"mcpv2 peers", cen.conns[kindMCPV2], "bare peers", cen.conns[kindBare], "bare routing table", cen.rt)
	return []line{l, info}, nil
}

// settleMesh reads every member's peer count each p.meshPoll until the
// total has stayed within meshSettled of itself for p.meshStable, at least
// p.meshMin after started, and every member has a peer (a bare host a
// routing-table entry). It returns how long after started that was, or -1
// when p.meshMax passed first.
func settleMesh(ctx context.Context, e *env, p plan, members []*meshMember, started time.Time) (time.Duration, error) {
	var (
		ref        = -1 // the total the later ones are held to
		lastChange time.Time
		lastLog    = time.Now()
	)
	for {
		if err := pollMesh(ctx, members); err != nil {
			return 0, err
		}
		now := time.Now()
		total, alone := 0, 0
		for _, m := range members {
			total += m.peers
			if m.peers == 0 || (m.kind == kindBare && m.rt == 0) {
				alone++
			}
		}
		if ref < 0 || math.Abs(float64(total-ref)) > meshSettled*float64(ref) || alone > 0 {
			ref, lastChange = total, now
		}
		since := now.Sub(started)
		if now.Sub(lastLog) >= 10*time.Second {
			e.log.Info("mesh settling", "after", since.Round(time.Second), "peer total", total, "without peers", alone)
			lastLog = now
		}
		if since >= p.meshMin && now.Sub(lastChange) >= p.meshStable {
			return since, nil
		}
		if since >= p.meshMax {
			e.log.Warn("the mesh did not settle", "after", since.Round(time.Second), "peer total", total, "without peers", alone)
			return -1, nil
		}
		select {
		case <-time.After(p.meshPoll):
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// pollMesh reads every member's peer count: a node's over its control
// socket (`mcpv2 status`'s), a bare host's from its STAT line.
func pollMesh(ctx context.Context, members []*meshMember) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(meshPollPar)
	for _, m := range members {
		g.Go(func() error {
			if m.kind == kindBare {
				v, err := m.c.ask(gctx, lean.AskStat, lean.NameStat)
				if err != nil {
					return err
				}
				var st lean.Stat
				if err := json.Unmarshal([]byte(v), &st); err != nil {
					return fmt.Errorf("%s's STAT line %q: %w", m.c.name, clip(v), err)
				}
				m.rt, m.peers = st.RT, st.Peers
				return nil
			}
			cl := localapi.NewClient(m.dir)
			defer cl.Close()
			sctx, cancel := context.WithTimeout(gctx, askTimeout)
			defer cancel()
			s, err := cl.Status(sctx)
			if err != nil {
				if aerr := m.c.alive(); aerr != nil {
					return aerr
				}
				return fmt.Errorf("%s's status: %w", m.c.name, err)
			}
			m.peers = s.Peers.Peers
			return nil
		})
	}
	return g.Wait()
}

// census is who the mesh's members see, as medians per kind: "146 (74
// mcpv2 + 72 bare)".
type census struct {
	// conns are the connected peers of each kind of member; rt the bare
	// hosts' routing tables (a node does not show its own).
	conns [2]string
	rt    string
}

// meshCensus asks every member which peers it is connected to (a node
// over its control socket, as `mcpv2 peers`; a bare host on its stdin),
// and each bare host which are in its routing table, and counts them by
// kind: both kinds must see both.
func meshCensus(ctx context.Context, members []*meshMember) (census, error) {
	kind := map[string]meshKind{}
	for _, m := range members {
		kind[m.id] = m.kind
	}
	type tally struct {
		all []float64    // the peers of each member
		of  [2][]float64 // of them, those of each kind
	}
	count := func(t *tally, ids []string) {
		var n [2]float64
		for _, id := range ids {
			if k, ok := kind[id]; ok {
				n[k]++
			}
		}
		t.all = append(t.all, float64(len(ids)))
		t.of[kindMCPV2] = append(t.of[kindMCPV2], n[kindMCPV2])
		t.of[kindBare] = append(t.of[kindBare], n[kindBare])
	}
	var (
		mu      sync.Mutex
		conns   [2]tally
		rt      tally
		g, ctx2 = errgroup.WithContext(ctx)
	)
	g.SetLimit(meshPollPar)
	for _, m := range members {
		g.Go(func() error {
			var connIDs, rtIDs []string
			if m.kind == kindBare {
				v, err := m.c.ask(ctx2, lean.AskPeers, lean.NamePeers)
				if err != nil {
					return err
				}
				var ps lean.PeerLists
				if err := json.Unmarshal([]byte(v), &ps); err != nil {
					return fmt.Errorf("%s's PEERS line %q: %w", m.c.name, clip(v), err)
				}
				connIDs, rtIDs = idStrings(ps.Conns), idStrings(ps.RT)
			} else {
				cl := localapi.NewClient(m.dir)
				defer cl.Close()
				sctx, cancel := context.WithTimeout(ctx2, askTimeout)
				defer cancel()
				ps, err := cl.Peers(sctx)
				if err != nil {
					return fmt.Errorf("%s's peers: %w", m.c.name, err)
				}
				seen := map[string]bool{}
				for _, c := range ps.Conns {
					if !seen[c.Peer] {
						seen[c.Peer] = true
						connIDs = append(connIDs, c.Peer)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			count(&conns[m.kind], connIDs)
			if m.kind == kindBare {
				count(&rt, rtIDs)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return census{}, err
	}
	// One mesh: each kind is connected to the other, and the bare hosts'
	// routing tables hold nodes.
	if median(conns[kindMCPV2].of[kindBare]) == 0 || median(conns[kindBare].of[kindMCPV2]) == 0 || median(rt.of[kindMCPV2]) == 0 {
		return census{}, fmt.Errorf("not one mesh: the median node is connected to %.0f bare hosts, the median bare host to %.0f nodes and has %.0f in its routing table",
			median(conns[kindMCPV2].of[kindBare]), median(conns[kindBare].of[kindMCPV2]), median(rt.of[kindMCPV2]))
	}
	text := func(t tally) string {
		return fmt.Sprintf("%.0f (%.0f mcpv2 + %.0f bare)", median(t.all), median(t.of[kindMCPV2]), median(t.of[kindBare]))
	}
	return census{conns: [2]string{text(conns[kindMCPV2]), text(conns[kindBare])}, rt: text(rt)}, nil
}

// idStrings are ids in their text form (as meshMember.id).
func idStrings(ids []peer.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
