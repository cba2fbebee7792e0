// Package keys keeps a node's API keys: the credentials a user pastes into
// an MCP client (Cursor, Claude Code) or an A2A agent, which the edge takes
// as Authorization: Bearer.
//
// A key's secret is protocol.KeyPrefix ("mcpv2_") and 43 base64url
// characters (32 bytes from crypto/rand). It is shown once, when the key is
// added; the ring stores only its SHA-256. Each key has a name (1 to 64 of
// A-Z, a-z, 0-9, '.', '_', '-'; the policy grants it skills as
// "key:<NAME>"), the skills it grants itself ("*" for every skill), when it
// was created, and optionally when it expires and when it was revoked.
//
// # The file
//
// The keys live in their own file, <data-dir>/keys.json, not in the node's
// state.db: the running node holds state.db locked, and `mcpv2 key add` and
// `mcpv2 key revoke` run as other processes while it runs. The file is
//
//	{"version": 1, "keys": [{"name": "ci", "sha256": "<64 hex digits>",
//	  "grants": ["echo"], "created": "2026-12-01T10:00:00Z",
//	  "expires": "2026-12-31T10:00:00Z", "revoked": "2026-12-02T08:00:00Z"}]}
//
// with "expires" and "revoked" omitted when unset. It is mode 0600 and is
// only ever replaced whole: a writer writes a temp file in the same
// directory, fsyncs it and renames it over keys.json
// (transport.WriteFile, on github.com/google/renameio/v2), so a reader sees the old file or the new
// one, never a part. Writers (Ring.Add, Ring.Revoke) hold an exclusive lock
// on keys.json.lock (github.com/gofrs/flock) across read, change and write,
// so two CLI processes adding keys at once both land. The lock file is left
// in place: removing it would let a third writer lock a new file while a
// second still holds the old one.
//
// A reader is capped at MaxFileSize and refuses, naming the file, anything
// it does not understand: bad JSON, an unknown member, a repeated member, a
// version other than 1, a bad name, hash, grant or time, a name or hash
// that appears twice. The file may have been edited by hand.
//
// # Seeing changes
//
// The node opens a Ring once and calls Ring.VerifyKey on every request.
// VerifyKey stats keys.json each time and reads it again when its size,
// modification time or identity (inode) changed, so a revocation is seen by
// the next request; an unchanged file costs one stat. A file modified
// within the last two seconds (or stamped in the future) is read again on
// every call until it is older: a file system's timestamps are coarse (a
// few milliseconds on Linux, seconds on some), and a second rewrite inside
// one tick that kept the size and reused the inode would otherwise go
// unseen. Text read again unchanged is not parsed again.
//
// If the file turns unreadable while the node runs (a bad hand edit), every
// key is refused until it is fixed: a broken file may hide a revocation.
// The reason goes to the Ring's logger (WithLogger); the caller is told
// only that the key file is unreadable (ErrUnreadable).
//
// A Ring starts no goroutines and holds no open file between calls; it has
// nothing to close.
package keys
