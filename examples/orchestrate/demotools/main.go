// Command demotools is the seed's five demo tools as one program, for mcpv2
// custom skills with a "command" handler (docs/spec.md §3): the first
// argument names the tool, the call's JSON arguments arrive on stdin, and
// the JSON result goes to stdout. Bad input ends it with exit status 1 and
// a one-line reason on stderr, which the node passes to the caller.
//
//	demotools calculator     {"operation":"multiply","a":7,"b":6}
//	demotools weather        {"city":"Tokyo"}
//	demotools database_query {"action":"count","department":"Platform","role":"engineer"}
//	demotools web_search     {"query":"kademlia dht","limit":3}
//	demotools file_reader    {"path":"handbook.txt","max_lines":20}   (--root DIR or DEMOTOOLS_FILES)
//
// Everything is offline sample data: no network, no live weather.
//
// Environment:
//
//	DEMOTOOLS_FILES     the directory file_reader reads in (the --root flag wins)
//	DEMOTOOLS_SLEEP_MS  wait this long before answering (0–60000), so that an
//	                    example can stop an agent in the middle of a call
//
// It uses the standard library only.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxInput caps the arguments read from stdin.
const maxInput = 1 << 20

// maxSleep caps DEMOTOOLS_SLEEP_MS.
const maxSleep = 60 * time.Second

// Environment variables demotools reads.
const (
	envFiles = "DEMOTOOLS_FILES"
	envSleep = "DEMOTOOLS_SLEEP_MS"
)

// config is what a tool may use beside its arguments.
type config struct {
	root string // file_reader's sandbox directory; "" = none given
}

// tool runs one call on its raw JSON arguments.
type tool func(cfg config, args []byte) (any, error)

// tools are the five tools by name.
var tools = map[string]tool{
	"calculator":     calculator,
	"weather":        weather,
	"database_query": databaseQuery,
	"web_search":     webSearch,
	"file_reader":    fileReader,
}

// toolNames lists the tools' names, sorted, for messages.
func toolNames() string {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// run is main without the process: argv without the program name, the
// streams and the environment. It returns the exit status: 0 with the
// result on stdout, 1 for a call that failed (bad arguments, division by
// zero, unknown city …), 2 for a bad command line; the reason goes to
// stderr as one line.
func run(argv []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	usage := fmt.Sprintf("usage: demotools TOOL [--root DIR] < ARGS_JSON\ntools: %s\n", toolNames())
	if len(argv) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if argv[0] == "-h" || argv[0] == "--help" || argv[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	name := argv[0]
	t, ok := tools[name]
	if !ok {
		fmt.Fprintf(stderr, "demotools: unknown tool %q (known: %s)\n", name, toolNames())
		return 2
	}
	fs := flag.NewFlagSet("demotools "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	root := fs.String("root", "", "file_reader: the directory to read in (default $"+envFiles+")")
	if err := fs.Parse(argv[1:]); err != nil {
		fmt.Fprintf(stderr, "demotools %s: %v\n", name, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demotools %s: unexpected argument %q (the tool's arguments come as JSON on stdin)\n", name, fs.Arg(0))
		return 2
	}
	cfg := config{root: *root}
	if cfg.root == "" {
		cfg.root = getenv(envFiles)
	}
	sleep, err := parseSleep(getenv(envSleep))
	if err != nil {
		fmt.Fprintf(stderr, "demotools %s: %v\n", name, err)
		return 2
	}

	in, err := io.ReadAll(io.LimitReader(stdin, maxInput+1))
	if err != nil {
		fmt.Fprintf(stderr, "demotools %s: reading the arguments: %v\n", name, err)
		return 1
	}
	if len(in) > maxInput {
		fmt.Fprintf(stderr, "demotools %s: arguments larger than %d bytes\n", name, maxInput)
		return 1
	}
	out, err := t(cfg, in)
	if err != nil {
		fmt.Fprintf(stderr, "demotools %s: %v\n", name, err)
		return 1
	}
	b, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintf(stderr, "demotools %s: encoding the result: %v\n", name, err)
		return 1
	}
	time.Sleep(sleep)
	if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
		fmt.Fprintf(stderr, "demotools %s: writing the result: %v\n", name, err)
		return 1
	}
	return 0
}

// parseSleep reads DEMOTOOLS_SLEEP_MS: empty is no wait.
func parseSleep(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	ms, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxSleep {
		return 0, fmt.Errorf("%s=%q: want whole milliseconds from 0 to %d", envSleep, s, maxSleep.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// decodeArgs decodes a call's arguments into v, a pointer to a struct:
// one JSON object (empty input or null count as {}), no unknown fields, no
// trailing data. Its errors name the field and say what was wanted.
func decodeArgs(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		data = []byte("{}")
	}
	if data[0] != '{' {
		return errors.New("bad arguments: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %s", jsonReason(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("bad arguments: trailing data after the JSON object")
	}
	return nil
}

// jsonReason turns an encoding/json error into words about JSON fields
// and types rather than Go ones.
func jsonReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := "a different type"
		switch te.Type.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Float64, reflect.Float32:
			want = "a number"
		case reflect.Int, reflect.Int64, reflect.Int32:
			want = "an integer"
		case reflect.Bool:
			want = "a boolean"
		case reflect.Pointer:
			switch te.Type.Elem().Kind() {
			case reflect.String:
				want = "a string"
			case reflect.Float64:
				want = "a number"
			case reflect.Int:
				want = "an integer"
			}
		}
		if te.Field == "" {
			return fmt.Sprintf("got a JSON %s, want %s", te.Value, want)
		}
		return fmt.Sprintf("field %q: got a JSON %s, want %s", te.Field, te.Value, want)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
