package a2aclient

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// sseEvent is one server-sent event (the data lines joined by "\n").
type sseEvent struct {
	Event, ID string
	Data      []byte
}

// errSSELine is returned for a line or an event over the cap.
var errSSELine = errors.New("event stream: an event is larger than the cap")

// readSSE decodes a text/event-stream (WHATWG HTML §9.2) from r and calls
// fn for every event that has data; an event's data (and any one line) is
// capped at max bytes. It returns fn's error, a read error, or nil at the
// end of the stream.
func readSSE(r io.Reader, max int, fn func(sseEvent) error) error {
	br := bufio.NewReaderSize(r, 4096)
	var ev sseEvent
	var data bytes.Buffer
	hasData := false
	for {
		line, err := readLine(br, max)
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			if errors.Is(err, io.EOF) {
				return nil // an unterminated last event is dropped, as the standard says
			}
			return err
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = bytes.Clone(data.Bytes())
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, hasData = sseEvent{}, false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > max {
				return fmt.Errorf("%w (%d bytes)", errSSELine, max)
			}
			data.Write(value)
			hasData = true
		case "event":
			ev.Event = string(value)
		case "id":
			if !bytes.ContainsRune(value, 0) {
				ev.ID = string(value)
			}
		}
	}
}

// readLine reads one line without its end (\n, \r\n or \r\n), at most max
// bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > max+2 {
			return nil, fmt.Errorf("%w (%d bytes)", errSSELine, max)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, err
	}
}
