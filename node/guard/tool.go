package guard

import (
	"github.com/mcpv2/mcpv2/internal/lazyre"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// maxPath is how many bytes of a path ScanPath looks at; a longer path adds
// a Low "truncated_scan" finding.
const maxPath = 4096

// pathDecode undoes the encodings used to sneak separators and dots past
// a filter: percent-encoding (repeated, for %252e), overlong UTF-8 forms of
// "." "/" "\" , backslashes, and NFKC (fullwidth "．．／").
func pathDecode(p string) string {
	if strings.Contains(p, "%u") || strings.Contains(p, "%U") {
		p = unescapePercentU(p)
	}
	for i := 0; i < 3 && strings.Contains(p, "%"); i++ {
		u, m := unescapePercent(p)
		if !m {
			break
		}
		p = u
	}
	p = strings.NewReplacer(
		"\xc0\xae", ".", "\xe0\x80\xae", ".", "\xc0\xaf", "/", "\xe0\x80\xaf", "/", "\xc1\x9c", "/", "\xc1\x81", "\\",
		"\u2215", "/", "\u2044", "/", "\u29f8", "/", "\u2216", "\\", "\u29f9", "\\", "\u2024", ".", "\u2025", "..",
	).Replace(p)
	p = norm.NFKC.String(p)
	p = strings.ReplaceAll(p, "\\", "/")
	return strings.ToLower(p)
}

// unescapePercentU decodes IIS's %uXXXX escapes ("%u002e%u002e%u2215").
func unescapePercentU(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+5 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') {
			if hi, ok := parseHex(s[i+2 : i+4]); ok {
				if lo, ok := parseHex(s[i+4 : i+6]); ok {
					b.WriteRune(rune(hi)<<8 | rune(lo))
					i += 5
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapePercent decodes %HH sequences only (a plus stays a plus).
func unescapePercent(s string) (string, bool) {
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if r, ok := parseHex(s[i+1 : i+3]); ok {
				b.WriteByte(byte(r))
				i += 2
				changed = true
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String(), changed
}

// sensitivePaths are paths (after pathDecode) whose reading leaks secrets or
// whose writing takes the machine over; matched as whole path segments.
var sensitivePaths = lazyre.New(`(?:^|/)(?:` + strings.Join([]string{
	`etc/(?:passwd|shadow|gshadow|sudoers|master\.passwd|security/opasswd|ssh/ssh_host_[a-z0-9_]+key)(?:$|/)`,
	`\.ssh(?:/|$)`, `id_(?:rsa|dsa|ecdsa|ed25519)(?:$|/)`, `authorized_keys`,
	`\.env(?:\.[a-z0-9_.-]+)?$`, `identity\.key$`, `proc/(?:self|\d+|thread-self)/(?:environ|cmdline|mem|maps|root|cwd|fd)`,
	`windows/(?:system32|syswow64|repair|win\.ini)`, `win\.ini$`, `boot\.ini$`, `system32/config`,
	`\.aws/(?:credentials|config)`, `\.kube/config`, `\.docker/config\.json`, `\.git-credentials`, `\.netrc$`, `\.pgpass$`,
	`\.(?:bash|zsh|sh|mysql|psql|python)_history$`, `\.htpasswd$`, `wp-config\.php$`, `\.gnupg(?:/|$)`,
	`var/run/secrets(?:/|$)`, `run/secrets(?:/|$)`, `\.config/gcloud`, `[a-z0-9_-]*\.(?:pem|p12|pfx|jks|keystore)$`,
	`(?:private|server|client|tls|ssl)\.key$`,
}, "|") + `)`)

// ScanPath checks a file-name argument: path_traversal for parent-directory
// segments (also percent-encoded, double-encoded, overlong UTF-8, backslash
// and "....//" forms), absolute paths (/, ~, a drive letter, UNC, file:),
// and NUL bytes; sensitive_path for well-known secret or system files
// (/etc/passwd, ~/.ssh, id_rsa, .env, identity.key, /proc/self/environ,
// C:\Windows\System32 …). It returns nil for a clean path.
func ScanPath(path string) []Finding {
	var out []Finding
	p := path
	if len(p) > maxPath {
		p = p[:cutBefore(p, maxPath)]
		out = append(out, Finding{Vector: VectorTruncated, Level: Low, Match: "path longer than 4096 bytes"})
	}
	add := func(vector, match string) {
		out = append(out, Finding{Vector: vector, Level: vectorLevels[vector], Match: clip(match)})
	}
	d := pathDecode(p)
	escapes := false // absolute, or climbing out with ".."
	switch {
	case strings.ContainsRune(d, 0):
		add(VectorPathTraversal, p)
	case strings.HasPrefix(d, "/"), strings.HasPrefix(d, "~"), strings.HasPrefix(d, "file:"),
		len(d) >= 2 && d[1] == ':' && d[0] >= 'a' && d[0] <= 'z':
		add(VectorPathTraversal, p)
		escapes = true
	default:
		for _, seg := range strings.Split(d, "/") {
			if dotSegment(seg) {
				add(VectorPathTraversal, p)
				escapes = true
				break
			}
		}
	}
	t := strings.TrimRight(d, "/\x00")
	if sensitivePaths().MatchString(t) || escapes && systemRoots().MatchString(rootRelative(t)) {
		add(VectorSensitivePath, p)
	}
	return out
}

// dotSegment says a path segment climbs: "..", "...." ("....//" once a
// filter removes "../"), ". ." and "..;" (a servlet container's path
// parameter).
func dotSegment(seg string) bool {
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i]
	}
	return len(seg) >= 2 && strings.Trim(seg, ". ") == "" && strings.Count(seg, ".") >= 2
}

// systemRoots are the top directories of a Unix system that a file skill
// never needs and that hold secrets or the kernel's view of processes:
// /proc, /sys, /root, /dev, /boot, /etc, /var/log, /var/lib, /home/*/…
// dot files, and ~root. Matched on rootRelative of an absolute or
// climbing path only: a relative "proc/notes.txt" inside the files
// directory is fine.
var systemRoots = lazyre.New(`^(?:(?:proc|sys|root|dev|boot|etc|var/(?:log|lib|spool|mail|backups)|~root)(?:/|$)|home/[^/]+/\.|~/\.)`)

// rootRelative drops what makes a path absolute or climb (a leading "/",
// "~/", "file://", a drive letter, "./" and ".." segments) so that
// systemRoots sees "proc/self/…" for "/proc/self/…", "../../proc/self/…"
// and "file:///proc/self/…".
func rootRelative(d string) string {
	d = strings.TrimPrefix(d, "file:")
	if len(d) >= 2 && d[1] == ':' {
		d = d[2:]
	}
	segs := strings.Split(d, "/")
	i := 0
	for i < len(segs) && (segs[i] == "" || segs[i] == "." || dotSegment(segs[i])) {
		i++
	}
	return strings.Join(segs[i:], "/")
}

// sqlNorm removes /* */ comments and percent-encoding, lowers and collapses
// space.
func sqlNorm(q string) string {
	if strings.Contains(q, "%") {
		if u, ok := unescapePercent(q); ok {
			q = u
		}
	}
	// MySQL runs the text of a /*! … */ comment: keep it.
	q = sqlExecComment().ReplaceAllString(q, " $1 ")
	q = sqlComment().ReplaceAllString(q, " ")
	return strings.Join(strings.Fields(strings.ToLower(q)), " ")
}

// sqlGlued is q with /* */ comments removed outright, so that keywords a
// comment splits ("UN/**/ION SEL/**/ECT") come together again.
func sqlGlued(q string) string {
	if !strings.Contains(q, "/*") {
		return ""
	}
	return strings.ToLower(sqlComment().ReplaceAllString(sqlExecComment().ReplaceAllString(q, "$1"), ""))
}

var (
	sqlComment     = lazyre.New(`(?s)/\*.*?\*/`)
	sqlExecComment = lazyre.New(`(?s)/\*!\d*(.*?)\*/`)
)

// sqlRules match in normalised query text.
var sqlRules = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		// a quote or bracket closed, then a comment cuts the rest of the query
		regexp.MustCompile(`['"\x60)]\s*(?:--|#|/\*)|\b(?:\d+|null)\s*--(?:\s|$)`),
		// stacked statements
		regexp.MustCompile(`;\s*(?:drop|delete|insert|update|alter|create|truncate|exec|execute|select|shutdown|grant|revoke|declare|waitfor|merge|replace|rename|attach|copy|load_file|call|set)\b`),
		// UNION-based extraction
		regexp.MustCompile(`\bunion(?:\s+all|\s+distinct)?\s+select\s+(?:null\b|\d|@@|\*|'|"|concat|char\(|version|user\(|database\(|group_concat|table_name|column_name|[\w.]+(?:\s*,\s*[\w.()]+)*\s+from\b)`),
		// time and error based
		regexp.MustCompile(`\b(?:sleep|pg_sleep|benchmark|dbms_lock\.sleep|randomblob)\s*\(|\bwaitfor\s+delay\b`),
		regexp.MustCompile(`\bxp_cmdshell\b|\bload_file\s*\(|\binto\s+(?:out|dump)file\b|\bextractvalue\s*\(|\bupdatexml\s*\(|\binformation_schema\b|@@version|\bpg_read_file\b|\butl_http\b|\bdbms_pipe\b|\bsys\.(?:user|objects|tables)\b`),
		// ORDER BY column probing after a quote
		regexp.MustCompile(`['"]\s*\)?\s*(?:order|group)\s+by\s+\d+`),
		// a subquery joined onto a closed string
		regexp.MustCompile(`['"]\s*(?:\|\||\+|and|or)\s*\(\s*select\b`),
		// always-true conditions spelled out
		regexp.MustCompile(`(?:['"]|\b\d+)\s*(?:or|\|\|)\s+(?:true|not\s+false)\b`),
		// a destructive statement, even alone: DROP TABLE x, TRUNCATE x,
		// DELETE FROM x, ALTER TABLE x …, GRANT … ON … TO
		regexp.MustCompile(`(?:^|[\s;('"])(?:drop|truncate)\s+(?:table|database|schema|view|index|user|role|procedure|function|trigger|sequence|column)\s+(?:if\s+exists\s+)?` + sqlIdent + `(?:\s*,\s*` + sqlIdent + `)*\s*(?:;|--|#|$|cascade\b|restrict\b|purge\b)`),
		regexp.MustCompile(`(?:^|[\s;('"])truncate\s+` + sqlIdent + `\s*(?:;|--|#|$)`),
		regexp.MustCompile(`(?:^|[\s;('"])delete\s+from\s+` + sqlIdent + `\s*(?:;|--|#|$|where\b|using\b|returning\b|limit\b)`),
		regexp.MustCompile(`(?:^|[\s;('"])alter\s+(?:table|database|schema|user|role|login|system|view|function|procedure|column)\s+(?:if\s+exists\s+)?` + sqlIdent + `\s+(?:add|drop|rename|alter|modify|change|owner|set|with|password|identified|disable|enable|attach|detach|reset)\b`),
		regexp.MustCompile(`(?:^|[\s;('"])grant\s+(?:all(?:\s+privileges)?|(?:select|insert|update|delete|create|drop|alter|execute|usage|superuser|dba)(?:\s*,\s*\w+)*)\s+(?:on\s+\S+\s+)?to\s+\S+`),
	}
})

// sqlIdent is a table or column name, maybe qualified or quoted.
const sqlIdent = `(?:[\w$]+|\x60[^\x60]+\x60|"[^"]+"|\[[^\]]+\])(?:\.(?:[\w$]+|\x60[^\x60]+\x60|"[^"]+"|\[[^\]]+\]))*`

// tautology finds "OR x=x" after a closed value: ' OR '1'='1, 1 OR 1=1,
// " OR ""=". RE2 has no back-references, so the two sides are compared in
// code.
var tautology = lazyre.New(`(?:['"]|\b\d+|\))\s*(?:or|\|\|)\s*\(?\s*(['"]?)([\w]*)(['"]?)\s*(=|<>|!=|>=|<=|>|<|like)\s*(['"]?)([\w]*)(['"]?)`)

// maxSQL is how many bytes of a query ScanSQL looks at: queries and the
// values put into them are short, and the patterns with captures cost more
// per byte than the prompt rules.
const maxSQL = 16 << 10

// ScanSQL checks a query argument for sql_injection: tautologies
// (' OR 1=1), comment truncation after a quote (admin'--), stacked
// statements (; DROP TABLE), UNION SELECT extraction, time-based probes
// (SLEEP, BENCHMARK, WAITFOR DELAY, pg_sleep) and the usual dangerous
// functions and catalogue reads. A single plain statement is not flagged.
// It looks at the first 16 KiB (a longer query adds a Low "truncated_scan"
// finding) and returns nil for a clean query.
func ScanSQL(query string) []Finding {
	var out []Finding
	q := query
	if len(q) > maxSQL {
		q = q[:cutBefore(q, maxSQL)]
		out = append(out, Finding{Vector: VectorTruncated, Level: Low, Match: "query longer than 16 KiB: the rest not scanned"})
	}
	n := sqlNorm(q)
	add := func(m string) {
		out = append(out, Finding{Vector: VectorSQLInjection, Level: High, Match: clip(m)})
	}
	for _, m := range tautology().FindAllStringSubmatch(n, 8) {
		lhs, op, rhs := m[1]+m[2]+m[3], m[4], m[5]+m[6]+m[7]
		// 'a'='a is the same value once the attacker's closing quote is
		// added back; a quote on one side only counts as that.
		same := m[2] == m[6] && (m[2] != "" || lhs != "" || rhs != "")
		if alwaysTrue(op, same, m[2], m[6]) {
			add(m[0])
			return out
		}
	}
	if strings.Contains(q, "/*!") {
		add(q[strings.Index(q, "/*!"):])
		return out
	}
	glued := sqlGlued(q)
	for _, re := range sqlRules() {
		if m := re.FindString(n); m != "" {
			add(m)
			break
		}
		if glued != "" {
			if m := re.FindString(glued); m != "" {
				add(m)
				break
			}
		}
	}
	return out
}

// alwaysTrue says whether "a op b" after OR is a tautology: equal values
// compared with = or LIKE, different ones with <> or !=, numbers that
// satisfy <, >, <= or >=.
func alwaysTrue(op string, same bool, a, b string) bool {
	switch op {
	case "=", "like":
		return same
	case "<>", "!=":
		return !same
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	switch op {
	case ">":
		return x > y
	case "<":
		return x < y
	case ">=":
		return x >= y
	}
	return x <= y
}
