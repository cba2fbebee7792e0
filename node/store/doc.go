// Package store is a node's embedded store under its data dir: the files the
// file skills act on, the LLM-mode conversation history, and the audit log.
//
// Layout inside the data dir (created 0700 if missing):
//
//	files/       the file skills' directory (overridable with WithFilesDir;
//	             the CLI maps MCPV2_FILE_STORE to it)
//	state.db       conversations, in one bbolt database
//	audit.jsonl    one JSON object per call, appended
//	audit.jsonl.N  older audit lines, .1 the newest (WithAuditRotation)
//
// Files are reached only through one *os.Root opened at start, so no name and
// no symlink can reach outside the directory. Names are plain names (see
// ValidateName), and a name that is itself a symlink is refused. Writes are
// atomic: the data goes to a temp file in the same directory, is fsynced,
// renamed over the target, and the directory is fsynced; a crash leaves the
// old file or the new one, never a partial one, and stale temp files are
// removed at the next Open.
//
// Every resource is bounded (see quota.go): the files directory by a quota
// (WithMaxStore) kept as a running count, one sender's unfinished uploads by
// WithMaxPartial (its oldest are dropped to admit a new one), stale partial
// uploads by WithPartialTTL, the audit log by rotation, and conversations by
// count (least recently used first) and age. Sweep removes what has outlived
// its time; the node calls it periodically.
//
// Conversations live in go.etcd.io/bbolt, chosen because it is pure Go (no
// cgo), keeps everything in one file, gives ACID transactions with fsync on
// commit, takes an exclusive file lock (so a second node on the same data dir
// fails fast with ErrInUse instead of corrupting it), and is maintained by the
// etcd project, which runs it in production at scale. A hand-written journal
// would have to re-solve torn writes and compaction; SQLite would need cgo or
// a much larger transpiled dependency.
//
// A *Store and its *Files are safe for concurrent use by multiple goroutines.
// Store.auditMu guards the audit log file and its rotation; Files.mu guards
// the in-memory SHA-256 cache; Files.qmu guards the quota count and makes
// each rename or removal one step with the stat of what it replaces;
// Files.partMu serializes the admission of partial uploads; bbolt serialises
// its own write transactions; the file system writes need no lock because
// each is a rename of a private temp file. The lock on state.db is taken before the files directory is touched,
// so a second Open that fails with ErrInUse never removes the first node's
// in-progress temp files.
package store
