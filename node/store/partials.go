package store

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// MaxPartialsListed bounds what Partials returns: the most recently
// written unfinished uploads.
const MaxPartialsListed = 1024

// PartialInfo is an unfinished upload the store keeps so that its sender
// can resume it (Files.OpenPartial): the upload of Name (Size bytes) by
// Owner, of which Have bytes have arrived.
type PartialInfo struct {
	// Owner is the sender (a PeerID); Owner, Name and Size are empty when
	// this process has not seen the upload opened (an earlier run left
	// it): the file's name is a hash of them.
	Owner string `json:"owner,omitempty"`
	Name  string `json:"name,omitempty"`
	Size  int64  `json:"size,omitempty"`
	// Have is the bytes kept.
	Have int64 `json:"have"`
	// Updated is when the last bytes were written.
	Updated time.Time `json:"updated"`
	// Active says a transfer holds the upload open now.
	Active bool `json:"active"`
}

// Partials lists the unfinished uploads in the files directory, the most
// recently written first, at most MaxPartialsListed of them. Their number
// is bounded by the store's quotas (WithMaxPartial per sender,
// WithMaxStore in all) and by the partial TTL. Safe for concurrent use.
func (f *Files) Partials() []PartialInfo {
	out := []PartialInfo{}
	names, err := f.readDir()
	if err != nil {
		return out
	}
	f.partMu.Lock()
	meta := make(map[string]partMeta, len(f.partMeta))
	for k, v := range f.partMeta {
		meta[k] = v
	}
	f.partMu.Unlock()
	for _, n := range names {
		if !strings.HasPrefix(n, partPrefix) {
			continue
		}
		st, err := f.root.Lstat(n)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		m := meta[n]
		_, open := heldPartSize(filepath.Join(f.dir, n))
		out = append(out, PartialInfo{Owner: m.owner, Name: m.name, Size: m.size, Have: st.Size(), Updated: st.ModTime(), Active: open})
	}
	slices.SortFunc(out, func(a, b PartialInfo) int {
		return cmp.Or(b.Updated.Compare(a.Updated), cmp.Compare(a.Name, b.Name))
	})
	if len(out) > MaxPartialsListed {
		out = out[:MaxPartialsListed]
	}
	return out
}
