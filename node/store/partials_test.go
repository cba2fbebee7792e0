package store

import (
	"context"
	"testing"
)

// TestPartials: an unfinished upload is listed with its owner, name, size
// and the bytes held, as active while open; one left by an earlier run
// (the store reopened) is listed by its bytes alone; a commit removes it.
func TestPartials(t *testing.T) {
	s, dir := openT(t)
	f := s.Files()
	if ps := f.Partials(); len(ps) != 0 {
		t.Fatalf("fresh store: %+v", ps)
	}
	data := []byte("0123456789")
	p, err := f.OpenPartial(context.Background(), "peerA", "a.txt", int64(len(data)), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data[:4]); err != nil {
		t.Fatal(err)
	}
	ps := f.Partials()
	if len(ps) != 1 || ps[0] != (PartialInfo{Owner: "peerA", Name: "a.txt", Size: 10, Have: 4, Updated: ps[0].Updated, Active: true}) || ps[0].Updated.IsZero() {
		t.Fatalf("open upload: %+v", ps)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if ps := f.Partials(); len(ps) != 1 || ps[0].Active || ps[0].Have != 4 {
		t.Fatalf("kept upload: %+v", ps)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ps = s2.Files().Partials()
	if len(ps) != 1 || ps[0].Owner != "" || ps[0].Name != "" || ps[0].Have != 4 {
		t.Fatalf("after a restart: %+v", ps)
	}
	p, err = s2.Files().OpenPartial(context.Background(), "peerA", "a.txt", int64(len(data)), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data[4:]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CommitSum(sumHex(data)); err != nil {
		t.Fatal(err)
	}
	if ps := s2.Files().Partials(); len(ps) != 0 {
		t.Fatalf("after the commit: %+v", ps)
	}
}
