package edge

import (
	"errors"
	"io"
	"net/http"
)

// ReadLimited reads r's whole body, at most limit bytes, as the edge reads
// every body (ReadBody): a known length within the cap is one allocation
// of exactly that size, an unknown one grows in chunks of up to 64 KiB
// joined once, so a body never costs a doubled cap as io.ReadAll's growth
// would. A body over the cap (by its Content-Length or as it is read) is an
// error wrapping *http.MaxBytesError; any other error is the body's read
// error (a deadline, a closed connection). It writes no answer: w is only
// for http.MaxBytesReader. Faces that authenticate their callers
// themselves (A2A over libp2p) read with it.
func ReadLimited(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	mr := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength >= 0 {
		// A known length within the cap: one allocation of exactly that
		// size, where io.ReadAll would grow by doubling.
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(mr, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	// An unknown length: chunks growing to 64 KiB, joined once, so the
	// body costs at most about twice its size, never a doubled cap.
	var chunks [][]byte
	var err error
	n, c := 0, make([]byte, 0, 512)
	for err == nil {
		var m int
		m, err = mr.Read(c[len(c):cap(c)])
		c, n = c[:len(c)+m], n+m
		if len(c) == cap(c) {
			chunks, c = append(chunks, c), make([]byte, 0, min(2*cap(c), 64<<10))
		}
	}
	if !errors.Is(err, io.EOF) {
		return nil, err
	}
	// joined only when the body is taken, not refused
	body := make([]byte, 0, n)
	for _, c := range append(chunks, c) {
		body = append(body, c...)
	}
	return body, nil
}
