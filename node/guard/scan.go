package guard

import (
	"sort"
)

// hit is a finding with its span in the scanned text ([s, e), or -1 for
// none).
type hit struct {
	vector string
	s, e   int
	match  string
}

// scanner holds the bounds of one Scan: the decoded bytes it may still
// rescan and the payloads it has decoded. Not safe for concurrent use; Scan
// makes one per call.
type scanner struct {
	budget   int // decoded bytes that may still be rescanned
	payloads int // encoded runs decoded so far
	// work is what the regexps may still be charged (see workPerByte);
	// exhausted records that it ran out.
	work      int
	exhausted bool
}

// Work budget: the regexps of one Scan are charged, per rule, the bytes
// they run over times the rule's weight (an anchored attempt at most 64
// bytes), up to workPerByte times the text's length plus workBase. Real
// documents take up to about 560 times their length (this repository's
// markdown and Go files, measured); junk built of the rules' own words runs out,
// which bounds its cost, and the rest of the scan is reported as a Low
// truncated_scan finding.
const (
	workPerByte = 1024
	workBase    = 64 << 10
)

// scan returns the hits in text, whose spans are offsets in text.
func (sc *scanner) scan(text string, depth int) []hit {
	hs := &hitSet{byVector: map[string][]int{}}
	add, found := hs.add, hs.found
	if depth == 0 {
		sc.work += workPerByte*len(text) + workBase
	}

	// 1. The folded view: the main one.
	v1, tags := fold(text, nil)
	sc.matchView(v1, hs, text, func(vector string, s, e int, obf bool) {
		if found(vector, s, e) {
			return
		}
		add(hit{vector: vector, s: s, e: e, match: text[s:e]})
		if obf && !found(VectorEncoding, s, e) {
			add(hit{vector: VectorEncoding, s: s, e: e, match: text[s:e]})
		}
	})

	// 2. The letters-only view, and its rot13 and reversed forms: a match
	// that the folded view missed was hidden by spacing, separators,
	// leetspeak, rot13 or reversal.
	v2 := squash(v1)
	sqRules := squashRules()
	for i, sv := range []*view{v2, rot13(v2), reversed(v2)} {
		rev := i == 2
		for ri := range sqRules {
			ru := &sqRules[ri]
			if hs.full(ru.vector) {
				continue
			}
			ok := ru.find(sv, &sc.work, func(vs, ve int) bool {
				s, e := sv.span(vs, ve)
				if rev {
					s, e = sv.spanRev(vs, ve)
				}
				if s >= e || found(ru.vector, s, e) || (i == 0 && quotedInQuestion(text, s, e)) {
					return !hs.full(ru.vector)
				}
				add(hit{vector: ru.vector, s: s, e: e, match: text[s:e]})
				if !found(VectorEncoding, s, e) {
					m := text[s:e]
					if i > 0 {
						m = sv.text[vs:ve]
					}
					add(hit{vector: VectorEncoding, s: s, e: e, match: m})
				}
				return !hs.full(ru.vector)
			})
			if !ok {
				sc.exhausted = true
			}
		}
	}

	// 3. The text with escape sequences decoded (\u0069, &#105;, %69 …).
	if u, m := unescape(text); m != nil {
		vu, _ := fold(u, m)
		sc.matchView(vu, hs, text, func(vector string, s, e int, _ bool) {
			if found(vector, s, e) {
				return
			}
			add(hit{vector: vector, s: s, e: e, match: text[s:e]})
			if !found(VectorEncoding, s, e) {
				add(hit{vector: VectorEncoding, s: s, e: e, match: text[s:e]})
			}
		})
	}

	// 4. Payloads: base64 and hex runs, and text in Unicode tag characters,
	// decoded and scanned again.
	if depth < maxDepth {
		var pls []payload
		for _, t := range tags {
			if sc.budget <= 0 || sc.payloads >= maxPayloads {
				break
			}
			s := string(t.text)
			if len(s) > sc.budget {
				s = s[:sc.budget]
			}
			sc.budget -= len(s)
			sc.payloads++
			pls = append(pls, payload{text: s, start: t.start, end: t.end})
		}
		var runs []payload
		runs, sc.budget, sc.payloads = encodedRuns(text, sc.budget, sc.payloads)
		pls = append(pls, runs...)
		for _, p := range pls {
			inner := sc.scan(p.text, depth+1)
			if len(inner) == 0 {
				continue
			}
			if !found(VectorEncoding, p.start, p.end) {
				add(hit{vector: VectorEncoding, s: p.start, e: p.end, match: text[p.start:p.end]})
			}
			for _, h := range inner {
				if h.vector == VectorEncoding || found(h.vector, p.start, p.end) {
					continue
				}
				add(hit{vector: h.vector, s: p.start, e: p.end, match: h.match})
			}
		}
	}
	return hs.hits
}

// maxPerVector caps the hits of one vector in one scan: more of the same
// add nothing to the verdict and would only cost time.
const maxPerVector = 32

// hitSet collects hits, indexed by vector.
type hitSet struct {
	hits     []hit
	byVector map[string][]int
}

func (hs *hitSet) add(h hit) {
	idx := hs.byVector[h.vector]
	if len(idx) >= maxPerVector {
		return
	}
	hs.byVector[h.vector] = append(idx, len(hs.hits))
	hs.hits = append(hs.hits, h)
}

// full reports whether vector has all the hits it may have.
func (hs *hitSet) full(vector string) bool { return len(hs.byVector[vector]) >= maxPerVector }

// found reports whether a hit of vector overlaps [s, e) already, or the
// vector has all the hits it may have.
func (hs *hitSet) found(vector string, s, e int) bool {
	idx := hs.byVector[vector]
	if len(idx) >= maxPerVector {
		return true
	}
	for _, i := range idx {
		if h := hs.hits[i]; h.s < e && s < h.e {
			return true
		}
	}
	return false
}

// matchView runs the prompt rules and the tag checks on a folded view and
// calls fn with each match's vector, its span in the original text, and
// whether an obfuscating character took part.
func (sc *scanner) matchView(v *view, hs *hitSet, text string, fn func(vector string, s, e int, obf bool)) {
	emit := func(vector string, vs, ve int) {
		s, e := v.span(vs, ve)
		if s >= e || e > len(text) {
			return
		}
		fn(vector, s, e, v.obfuscated(vs, ve))
	}
	prs := promptRules()
	for i := range prs {
		ru := &prs[i]
		if hs.full(ru.vector) {
			continue
		}
		if !ru.find(v, &sc.work, func(vs, ve int) bool {
			if !quotedInQuestion(v.text, vs, ve) {
				emit(ru.vector, vs, ve)
			}
			return !hs.full(ru.vector)
		}) {
			sc.exhausted = true
		}
	}
	if !hs.full(VectorXMLTagInjection) && !xmlTags(v, &sc.work, func(vs, ve int) bool {
		emit(VectorXMLTagInjection, vs, ve)
		return !hs.full(VectorXMLTagInjection)
	}) {
		sc.exhausted = true
	}
}

// dedup orders hits by place (spanless ones last), drops a hit that
// overlaps an earlier one of the same vector, and keeps at most maxFindings,
// the highest levels first.
func dedup(hits []hit) []hit {
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if (a.s < 0) != (b.s < 0) {
			return b.s < 0
		}
		if a.s != b.s {
			return a.s < b.s
		}
		return vectorLevels[a.vector] > vectorLevels[b.vector]
	})
	lastEnd := map[string]int{}
	out := hits[:0]
	for _, h := range hits {
		if h.s >= 0 {
			if e, ok := lastEnd[h.vector]; ok && h.s < e {
				continue
			}
			lastEnd[h.vector] = h.e
		}
		out = append(out, h)
	}
	if len(out) > maxFindings {
		idx := make([]int, len(out))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(i, j int) bool {
			return vectorLevels[out[idx[i]].vector] > vectorLevels[out[idx[j]].vector]
		})
		keep := idx[:maxFindings]
		sort.Ints(keep)
		kept := make([]hit, 0, maxFindings)
		for _, i := range keep {
			kept = append(kept, out[i])
		}
		out = kept
	}
	return out
}

// quotedInQuestion reports whether t[s:e] is quoted on its own inside a
// question, as in: is 'ignore previous instructions' still effective? That
// is talk about an attack, not one.
func quotedInQuestion(t string, s, e int) bool {
	isQuote := func(c byte) bool { return c == '\'' || c == '"' || c == '`' }
	// Skip one space inside the quotes, and the closing quote's UTF-8
	// forms (’ ” end in 0x99 and 0x9d).
	b := s - 1
	if b >= 0 && t[b] == ' ' {
		b--
	}
	a := e
	if a < len(t) && t[a] == ' ' {
		a++
	}
	openQ := b >= 0 && (isQuote(t[b]) || (b >= 2 && t[b-2] == 0xe2 && t[b-1] == 0x80 && (t[b] == 0x98 || t[b] == 0x9c)))
	closeQ := a < len(t) && (isQuote(t[a]) || (a+2 < len(t) && t[a] == 0xe2 && t[a+1] == 0x80 && (t[a+2] == 0x99 || t[a+2] == 0x9d)))
	if !openQ || !closeQ {
		return false
	}
	for i := a + 1; i < len(t) && i < a+200; i++ {
		switch t[i] {
		case '?':
			return true
		case '.', '!', '\n', ':', ';':
			return false
		}
	}
	return false
}
