package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcpv2/mcpv2/internal/suggest"
	"github.com/mcpv2/mcpv2/protocol"
)

// Static resources (issue 23): a node serves resources of its own, each a
// URI with a name, a media type and a content that is inline (text or
// JSON) or a file read at read time. They come from a resources file
// (Config.ResourcesFile, --resources) or, without one, from the folder
// <DataDir>/resources/, each regular file of which is a resource
// resource://NAME. The MCP face lists and reads them beside its own
// mcpv2:// resources, and the REST face through it.
//
// Who may read: an entry marked "public" is read by any caller the edge
// lets in (anonymous ones included); any other only by secret holders and
// callers the policy grants the pseudo-skill read_resource (a grant like
// any skill's: {"grants": {"http": ["read_resource"]}}). Resources lists a
// caller only what it may read. Every read is rate limited as a call
// (--rate-limit, and a policy limit on read_resource) and audited, method
// resources/read, skill read_resource.

// ReadResourceSkill is the pseudo-skill a policy grants to let callers
// read the node's resources that are not public. It is no skill of the
// registry: tools/list does not show it.
const ReadResourceSkill = "read_resource"

// ResourceInfo is a resource as listed (protocol.ResourceInfo).
type ResourceInfo = protocol.ResourceInfo

// Caps of the resources.
const (
	// MaxResources caps the entries of a resources file, and the files of
	// a resources folder that are served.
	MaxResources = 256
	// MaxResourcesFile caps a resources file's bytes.
	MaxResourcesFile = 8 << 20
	// MaxResourceBytes caps one resource's content: an inline text or
	// JSON, and a file at read time.
	MaxResourceBytes = 4 << 20
	// MaxResourceURI caps a URI's bytes.
	MaxResourceURI = 1024
	// maxResourceName and maxResourceDesc cap a name and a description.
	maxResourceName = 256
	maxResourceDesc = 4096
)

// resource is one entry: its listing, and its content (inline) or the
// absolute path of its file.
type resource struct {
	info ResourceInfo
	data []byte // inline content; nil for a file
	file string // absolute path; "" for inline
}

// resourceEntry is an entry of the file's form:
//
//	{"resources": [
//	  {"uri": "resource://company_knowledge", "name": "company_knowledge",
//	   "description": "Mission, products, tech stack", "mime_type": "application/json",
//	   "json": {"mission": "…"}, "public": true},
//	  {"uri": "resource://handbook", "file": "files/handbook.txt"},
//	  {"uri": "note://motd", "text": "Welcome."}]}
//
// Exactly one of text, json and file gives the content; file is relative
// to the resources file's folder, or absolute.
type resourceEntry struct {
	URI         string          `json:"uri"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	MIMEType    string          `json:"mime_type"`
	Text        *string         `json:"text"`
	JSON        json.RawMessage `json:"json"`
	File        string          `json:"file"`
	Public      bool            `json:"public"`
}

type resourcesFile struct {
	Resources []resourceEntry `json:"resources"`
}

// resourceFields are the fields of the file's form, for a did-you-mean.
var (
	resourcesFields     = []string{"resources"}
	resourceEntryFields = []string{"uri", "name", "description", "mime_type", "text", "json", "file", "public"}
)

// uriScheme is a URI scheme (RFC 3986 §3.1).
var uriScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// loadResourcesFile reads a resources file. A missing file is no resources
// unless mustExist is set; every other problem names the file, the entry
// and the field.
func loadResourcesFile(path string, mustExist bool) ([]resource, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !mustExist {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resources file %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxResourcesFile+1))
	if err != nil {
		return nil, fmt.Errorf("resources file %s: %w", path, err)
	}
	if len(data) > MaxResourcesFile {
		return nil, fmt.Errorf("resources file %s: larger than %d bytes", path, MaxResourcesFile)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resources file %s: %w", path, err)
	}
	return parseResources(path, filepath.Dir(abs), data)
}

// parseResources parses the resources file format: name is used in
// errors, dir is the folder that relative file paths start from. It
// checks every entry (see resourceEntry) but does not open the files.
func parseResources(name, dir string, data []byte) ([]resource, error) {
	var rf resourcesFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rf); err != nil {
		hint := ""
		if field, ok := protocol.JSONUnknownField(err); ok {
			hint = suggest.Hint(field, append(slices.Clone(resourcesFields), resourceEntryFields...))
		}
		return nil, fmt.Errorf("resources file %s: %s%s", name, protocol.JSONErrorText(err), hint)
	}
	if dec.More() {
		return nil, fmt.Errorf("resources file %s: data after the JSON object", name)
	}
	if len(rf.Resources) > MaxResources {
		return nil, fmt.Errorf("resources file %s: %d resources, more than %d", name, len(rf.Resources), MaxResources)
	}
	out := make([]resource, 0, len(rf.Resources))
	seen := map[string]int{}
	for i, e := range rf.Resources {
		r, err := e.check(dir)
		if err != nil {
			return nil, fmt.Errorf("resources file %s: resource %d%s: %w", name, i+1, quotedURI(e.URI), err)
		}
		if j, ok := seen[r.info.URI]; ok {
			return nil, fmt.Errorf("resources file %s: resource %d: uri %q is also resource %d's", name, i+1, protocol.Clip(r.info.URI, 200), j)
		}
		seen[r.info.URI] = i + 1
		out = append(out, r)
	}
	return out, nil
}

func quotedURI(u string) string {
	if u == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", protocol.Clip(u, 120))
}

// check validates one entry and returns it as served.
func (e resourceEntry) check(dir string) (resource, error) {
	if err := checkResourceURI(e.URI); err != nil {
		return resource{}, err
	}
	r := resource{info: ResourceInfo{URI: e.URI, Name: e.Name, Description: e.Description, MIMEType: e.MIMEType, Public: e.Public}}
	if r.info.Name == "" {
		r.info.Name = defaultResourceName(e.URI)
	}
	switch {
	case len(r.info.Name) > maxResourceName || !utf8.ValidString(r.info.Name) || strings.ContainsFunc(r.info.Name, unicode.IsControl):
		return resource{}, fmt.Errorf("name: want at most %d bytes of printable UTF-8", maxResourceName)
	case len(e.Description) > maxResourceDesc || !utf8.ValidString(e.Description):
		return resource{}, fmt.Errorf("description: want at most %d bytes of UTF-8", maxResourceDesc)
	}
	n := 0
	for _, set := range []bool{e.Text != nil, len(e.JSON) > 0, e.File != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return resource{}, errors.New(`give exactly one of "text", "json" and "file" as its content`)
	}
	switch {
	case e.Text != nil:
		if len(*e.Text) > MaxResourceBytes {
			return resource{}, fmt.Errorf("text: %d bytes, more than %d", len(*e.Text), MaxResourceBytes)
		}
		r.data = []byte(*e.Text)
		if r.info.MIMEType == "" {
			r.info.MIMEType = "text/plain; charset=utf-8"
		}
	case len(e.JSON) > 0:
		var b bytes.Buffer
		if err := json.Indent(&b, e.JSON, "", "  "); err != nil {
			return resource{}, fmt.Errorf("json: %s", protocol.JSONErrorText(err))
		}
		if b.Len() > MaxResourceBytes {
			return resource{}, fmt.Errorf("json: %d bytes, more than %d", b.Len(), MaxResourceBytes)
		}
		r.data = b.Bytes()
		if r.info.MIMEType == "" {
			r.info.MIMEType = "application/json"
		}
	default:
		if strings.IndexByte(e.File, 0) >= 0 || len(e.File) > 4096 {
			return resource{}, errors.New("file: not a path (a NUL byte, or longer than 4096 bytes)")
		}
		p := e.File
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		r.file = filepath.Clean(p)
		if r.info.MIMEType == "" {
			r.info.MIMEType = resourceMIME(r.file)
		}
	}
	if _, _, err := mime.ParseMediaType(r.info.MIMEType); err != nil || len(r.info.MIMEType) > 200 {
		return resource{}, fmt.Errorf("mime_type %q: not a media type such as text/plain or application/json", protocol.Clip(r.info.MIMEType, 100))
	}
	if r.data != nil {
		r.info.Size = int64(len(r.data))
	}
	return r, nil
}

// checkResourceURI refuses a URI that is empty, too long, with spaces or
// control characters, without a scheme, or of the mcpv2 scheme the MCP
// face serves itself. Beyond that a URI is an opaque name, compared whole.
func checkResourceURI(u string) error {
	switch {
	case u == "":
		return errors.New(`uri: missing (want a URI with a scheme, e.g. "resource://company_knowledge")`)
	case len(u) > MaxResourceURI:
		return fmt.Errorf("uri: %d bytes, more than %d", len(u), MaxResourceURI)
	case !utf8.ValidString(u) || strings.ContainsFunc(u, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }):
		return errors.New("uri: holds spaces, control characters or bad UTF-8")
	}
	scheme, rest, ok := strings.Cut(u, ":")
	if !ok || !uriScheme.MatchString(scheme) || rest == "" {
		return fmt.Errorf(`uri %q: no scheme (want e.g. "resource://company_knowledge")`, protocol.Clip(u, 120))
	}
	if strings.EqualFold(scheme, "mcpv2") {
		return fmt.Errorf("uri %q: the mcpv2: scheme is the MCP face's own (mcpv2://card, mcpv2://files); choose another, e.g. resource://", protocol.Clip(u, 120))
	}
	return nil
}

// defaultResourceName is the last part of a URI's path, else its host,
// else the URI ("resource://company_knowledge" → "company_knowledge").
func defaultResourceName(u string) string {
	if p, err := url.Parse(u); err == nil {
		if base := strings.Trim(p.Path, "/"); base != "" {
			if i := strings.LastIndexByte(base, '/'); i >= 0 {
				base = base[i+1:]
			}
			return protocol.Clip(base, maxResourceName)
		}
		if p.Host != "" {
			return protocol.Clip(p.Host, maxResourceName)
		}
	}
	return protocol.Clip(u, maxResourceName)
}

// resourceMIMEs are the media types of the common extensions, fixed so
// that a listing does not depend on the host's mime.types.
var resourceMIMEs = map[string]string{
	".txt": "text/plain; charset=utf-8", ".md": "text/markdown; charset=utf-8", ".json": "application/json",
	".csv": "text/csv; charset=utf-8", ".html": "text/html; charset=utf-8", ".xml": "text/xml; charset=utf-8",
	".yaml": "application/yaml", ".yml": "application/yaml", ".pdf": "application/pdf", ".png": "image/png",
	".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": "image/svg+xml",
}

func resourceMIME(path string) string {
	if t := resourceMIMEs[strings.ToLower(filepath.Ext(path))]; t != "" {
		return t
	}
	return "application/octet-stream"
}

// loadResourceDir serves each regular file of dir (not hidden, not in a
// subfolder) as resource://NAME, NAME its file name path-escaped; at most
// MaxResources, in name order. A missing dir is no resources.
func loadResourceDir(dir string) ([]resource, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resources folder %s: %w", dir, err)
	}
	var out []resource
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if len(out) == MaxResources {
			return nil, fmt.Errorf("resources folder %s: more than %d files; serve fewer, or list them in a --resources file", dir, MaxResources)
		}
		uri := "resource://" + url.PathEscape(e.Name())
		if err := checkResourceURI(uri); err != nil {
			return nil, fmt.Errorf("resources folder %s: file %q: %w", dir, protocol.Clip(e.Name(), 120), err)
		}
		p := filepath.Join(dir, e.Name())
		out = append(out, resource{info: ResourceInfo{URI: uri, Name: e.Name(), MIMEType: resourceMIME(p)}, file: p})
	}
	return out, nil
}

// loadResources reads the node's resources: the file, which must exist
// when named, else the folder <DataDir>/resources.
func loadResources(cfg *Config) ([]resource, error) {
	if cfg.ResourcesFile != "" {
		return loadResourcesFile(cfg.ResourcesFile, true)
	}
	return loadResourceDir(filepath.Join(cfg.DataDir, "resources"))
}

// mayRead says whether c may read r: a public one, anyone; any other,
// whoever the policy grants read_resource (grant's one rule).
func (n *Node) mayRead(c protocol.Caller, r *resource) *protocol.Error {
	if r.info.Public || n.grant(c, "", protocol.PurposeRPC, ReadResourceSkill) == nil {
		return nil
	}
	who := c.ID
	if c.Kind == protocol.CallerAnonymous {
		who = protocol.PolicyHTTP
	}
	return &protocol.Error{Code: protocol.CodeNotPermitted,
		Message: fmt.Sprintf("not permitted: resource %q is not public, and only secret holders and callers granted the pseudo-skill %q may read it. "+
			"To allow it, mark the resource \"public\": true in the resources file, or grant it in this node's policy file (policy.json in its data dir, or its --policy) and restart it: "+
			"{\"grants\": {\"%s\": [\"%s\"]}}", protocol.Clip(r.info.URI, 200), ReadResourceSkill, protocol.Clip(who, 120), ReadResourceSkill),
		Data: map[string]string{"skill": ReadResourceSkill, "uri": protocol.Clip(r.info.URI, 200), "caller": c.Kind.String()}}
}

// Resources returns the node's resources that c may read, in the order
// they were given. Safe for concurrent use.
func (n *Node) Resources(c protocol.Caller) []ResourceInfo {
	out := make([]ResourceInfo, 0, len(n.resources))
	for i := range n.resources {
		if n.mayRead(c, &n.resources[i]) == nil {
			out = append(out, n.resources[i].info)
		}
	}
	return out
}

// ReadResource reads the resource uri for c: its inline content, or its
// file now (at most MaxResourceBytes), as text when it is UTF-8, else as
// bytes. It is refused -32007 for a URI the node does not serve, -32009
// for a resource c may not read (Resources says who may), -32005 past the
// caller's rate; it writes one audit line (method resources/read, skill
// read_resource). Safe for concurrent use.
func (n *Node) ReadResource(ctx context.Context, c protocol.Caller, uri string) (out protocol.ResourceContents, perr *protocol.Error) {
	start := time.Now()
	defer func() { n.audit(ctx, c, "resources/read", ReadResourceSkill, perr, start) }()
	i := slices.IndexFunc(n.resources, func(r resource) bool { return r.info.URI == uri })
	if i < 0 {
		return out, &protocol.Error{Code: protocol.CodeFileNotFound,
			Message: fmt.Sprintf("resource not found: %q is not a resource of this node (resources/list names them)", protocol.Clip(uri, 200)),
			Data:    map[string]string{"uri": protocol.Clip(uri, 200)}}
	}
	r := &n.resources[i]
	if perr = n.mayRead(c, r); perr != nil {
		return out, perr
	}
	if ok, wait := n.limits.allow(c.ID, 1, start); !ok {
		return out, &protocol.Error{Code: protocol.CodeRateLimited, Message: fmt.Sprintf("rate limited: retry after %dms", wait.Milliseconds()),
			Data: map[string]any{"retry_after_ms": wait.Milliseconds()}}
	}
	if ok, wait := n.policy.allowSkill(c.ID, ReadResourceSkill, start); !ok {
		return out, &protocol.Error{Code: protocol.CodeRateLimited,
			Message: fmt.Sprintf("rate limited: this node's policy limits %q per caller; retry after %dms", ReadResourceSkill, wait.Milliseconds()),
			Data:    map[string]any{"retry_after_ms": wait.Milliseconds(), "skill": ReadResourceSkill}}
	}
	data := r.data
	if r.file != "" {
		var err error
		if data, err = readResourceFile(r.file); err != nil {
			n.log.Warn("resource file unreadable", "uri", protocol.Clip(uri, 200), "file", r.file, "err", err)
			return out, protocol.Errorf(protocol.CodeToolExecution, "resource %q cannot be read now: %v", protocol.Clip(uri, 200), err)
		}
	}
	out = protocol.ResourceContents{URI: r.info.URI, MIMEType: r.info.MIMEType}
	if utf8.Valid(data) {
		out.Text = string(data)
	} else {
		out.Blob = data
	}
	return out, nil
}

// readResourceFile reads a resource's file, refusing one larger than
// MaxResourceBytes or not a regular file. Its errors do not name the
// host's path.
func readResourceFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, errors.New("its file does not exist")
		case errors.Is(err, os.ErrPermission):
			return nil, errors.New("its file may not be read by the node")
		}
		return nil, errors.New("its file cannot be opened")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("its file is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxResourceBytes+1))
	if err != nil {
		return nil, errors.New("its file could not be read")
	}
	if len(data) > MaxResourceBytes {
		return nil, fmt.Errorf("its file is larger than %d bytes", MaxResourceBytes)
	}
	return data, nil
}
