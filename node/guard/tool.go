package guard

import (
	"github.com/mcpv2/mcpv2/internal/lazyre"
	"regexp"
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
	for i := 0; i < 3 && strings.Contains(p, "%"); i++ {
		u, m := unescapePercent(p)
		if !m {
			break
		}
		p = u
	}
	p = strings.NewReplacer(
		"\xc0\xae", ".", "\xe0\x80\xae", ".", "\xc0\xaf", "/", "\xe0\x80\xaf", "/", "\xc1\x9c", "/", "\xc1\x81", "\\",
	).Replace(p)
	p = norm.NFKC.String(p)
	p = strings.ReplaceAll(p, "\\", "/")
	return strings.ToLower(p)
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
	switch {
	case strings.ContainsRune(d, 0):
		add(VectorPathTraversal, p)
	case strings.HasPrefix(d, "/"), strings.HasPrefix(d, "~"), strings.HasPrefix(d, "file:"),
		len(d) >= 2 && d[1] == ':' && d[0] >= 'a' && d[0] <= 'z':
		add(VectorPathTraversal, p)
	default:
		for _, seg := range strings.Split(d, "/") {
			if len(seg) >= 2 && strings.Trim(seg, ". ") == "" {
				add(VectorPathTraversal, p)
				break
			}
		}
	}
	if sensitivePaths().MatchString(strings.TrimRight(d, "/\x00")) {
		add(VectorSensitivePath, p)
	}
	return out
}

// sqlNorm removes /* */ comments and percent-encoding, lowers and collapses
// space.
func sqlNorm(q string) string {
	if strings.Contains(q, "%") {
		if u, ok := unescapePercent(q); ok {
			q = u
		}
	}
	q = sqlComment().ReplaceAllString(q, " ")
	return strings.Join(strings.Fields(strings.ToLower(q)), " ")
}

var sqlComment = lazyre.New(`/\*.*?\*/`)

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
	}
})

// tautology finds "OR x=x" after a closed value: ' OR '1'='1, 1 OR 1=1,
// " OR ""=". RE2 has no back-references, so the two sides are compared in
// code.
var tautology = lazyre.New(`(?:['"]|\b\d+|\))\s*(?:or|\|\|)\s+(['"]?)([\w]*)(['"]?)\s*(=|<>|!=|like)\s*(['"]?)([\w]*)(['"]?)`)

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
		if op == "=" || op == "like" {
			if same {
				add(m[0])
				return out
			}
		} else if !same {
			add(m[0])
			return out
		}
	}
	for _, re := range sqlRules() {
		if m := re.FindString(n); m != "" {
			add(m)
			break
		}
	}
	return out
}
