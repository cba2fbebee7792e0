package protocol

// ResourceInfo describes a static resource a node serves (mcpv2 node
// --resources): what MCP resources/list and the REST face list.
type ResourceInfo struct {
	// URI names the resource, with a scheme ("resource://company_knowledge").
	URI string `json:"uri"`
	// Name is a short name for people and models.
	Name string `json:"name"`
	// Description says what the resource holds.
	Description string `json:"description,omitempty"`
	// MIMEType is the media type of its content.
	MIMEType string `json:"mime_type,omitempty"`
	// Size is the content's size in bytes when it is known (text and
	// JSON entries); 0 for a file, read at read time.
	Size int64 `json:"size,omitempty"`
	// Public says that anyone the edge lets in may read it; otherwise
	// only secret holders and callers granted the pseudo-skill
	// read_resource.
	Public bool `json:"public,omitempty"`
}

// ResourceContents is a resource as read: text, or bytes when the content
// is not valid UTF-8.
type ResourceContents struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mime_type,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     []byte `json:"blob,omitempty"`
}
