package keys

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkVerifyKey measures what a request pays for its key: the stat of
// keys.json, the SHA-256 of the secret and the lookup, in a ring of 100
// keys. "stat" is a bare os.Stat of the file, the floor of a check that
// sees the file as it is; "recent" is a file modified in the last two
// seconds, which is read again at every call (see the package comment);
// "parallel" is the steady case from GOMAXPROCS goroutines.
func BenchmarkVerifyKey(b *testing.B) {
	path := filepath.Join(b.TempDir(), FileName)
	r := openT(b, path)
	var secret string
	for i := range 100 {
		secret = addT(b, r, fmt.Sprintf("key-%03d", i), []string{"echo", "summarize"}, 0)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		b.Fatal(err)
	}
	b.Run("stat", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.Stat(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("steady", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := r.VerifyKey(secret); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := r.VerifyKey(secret); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("recent", func(b *testing.B) {
		now := time.Now()
		if err := os.Chtimes(path, now, now); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := r.VerifyKey(secret); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.Chtimes(path, old, old); err != nil {
			b.Fatal(err)
		}
	})
}
