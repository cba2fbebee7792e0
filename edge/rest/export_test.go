package rest

// RouteKeys lists "METHOD PATH" of every route the face mounts (for the
// test that checks the OpenAPI document lists the same ones).
func RouteKeys() []string {
	var out []string
	for _, r := range routes {
		for _, m := range r.methods {
			out = append(out, m+" "+r.path)
		}
	}
	return append(out, "GET "+OpenAPIPath, "GET "+DocsPath)
}

// DecodeBody is decodeBody, for the fuzz target.
var DecodeBody = decodeBody
