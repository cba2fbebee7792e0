package edge

import (
	"io"
	"sync"
)

// Cache keeps at most Max values by key, made on first use by New; past
// Max, the value used longest ago is closed and dropped. The faces keep the
// faces of mesh peers in one. Safe for concurrent use; mu guards m and
// order. New runs with mu held, so it must not call back into the Cache.
type Cache[V io.Closer] struct {
	Max int
	New func(key string) V

	mu    sync.Mutex
	m     map[string]V
	order []string // keys, least recently used first
}

// Get returns key's value, made by New when there is none.
func (c *Cache[V]) Get(key string) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[key]; ok {
		for i, k := range c.order {
			if k == key {
				c.order = append(append(c.order[:i:i], c.order[i+1:]...), key)
				break
			}
		}
		return v
	}
	if c.m == nil {
		c.m = map[string]V{}
	}
	if len(c.order) >= c.Max && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		_ = c.m[old].Close()
		delete(c.m, old)
	}
	v := c.New(key)
	c.m[key] = v
	c.order = append(c.order, key)
	return v
}

// Close closes every value and empties the cache.
func (c *Cache[V]) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.m {
		_ = v.Close()
	}
	c.m, c.order = nil, nil
}
