package guard

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The vector names, as they appear in findings on the wire.
const (
	VectorInstructionOverride = "instruction_override"
	VectorPersonaHijacking    = "persona_hijacking"
	VectorPromptExtraction    = "system_prompt_extraction"
	VectorXMLTagInjection     = "xml_tag_injection"
	VectorMarkdownDelimiter   = "markdown_delimiter_injection"
	VectorEncoding            = "encoding_obfuscation"
	VectorDataExfiltration    = "data_exfiltration"
	VectorPathTraversal       = "path_traversal"
	VectorSensitivePath       = "sensitive_path"
	VectorSQLInjection        = "sql_injection"
	VectorTruncated           = "truncated_scan"
)

// vectorLevels is the threat level of each vector. Read-only.
var vectorLevels = map[string]Level{
	VectorInstructionOverride: Critical,
	VectorPersonaHijacking:    High,
	VectorPromptExtraction:    High,
	VectorXMLTagInjection:     Critical,
	VectorMarkdownDelimiter:   High,
	VectorEncoding:            Medium,
	VectorDataExfiltration:    High,
	VectorPathTraversal:       High,
	VectorSensitivePath:       High,
	VectorSQLInjection:        High,
	VectorTruncated:           Low,
}

// VectorLevel returns the threat level findings of the named vector carry,
// and None for an unknown name.
func VectorLevel(vector string) Level { return vectorLevels[vector] }

// rule is one regular expression for one vector. Most rules run anchored
// (see starts below). The rest run on windows of the view around the
// occurrences of their anchors (literal strings every match contains, with
// back and fwd bounding a match around them), merged so that each byte is
// matched at most once per rule: the cost stays linear in the text. back +
// fwd also bounds the length of a match, since the expressions' gaps are
// unbounded (a counted gap costs the regexp engine a state per count).
type rule struct {
	vector  string
	re      *regexp.Regexp
	anchors []string
	back    int // how far before an anchor a match may start
	fwd     int // how far after an anchor's start a match may end
	// required are literal groups every match holds (see
	// requiredLiterals), checked on each window before the regexp runs.
	required [][]string
	// When every match starts with one of starts (after a word boundary
	// if wordStart), the rule runs anchored: anchored (the expression with
	// ^) is tried at each place a start occurs, on at most back+fwd bytes, cut
	// at the end of the line or sentence when the expression cannot cross
	// it (cut). That costs a few steps where a match fails early, instead
	// of the whole alternation at every byte.
	starts    []string
	wordStart bool
	anchored  *regexp.Regexp
	cut       string // "", "line" or "sentence"
	// weight scales the bytes a run of the rule is charged to the work
	// budget by the size of its program: the regexp engine's cost per
	// byte grows with it.
	weight int
	// long says the expression has an unbounded loop over a broad class
	// (a gap, \S+, [^)]+): a failing attempt may run far.
	long bool
}

func alt(ws ...string) string { return "(?:" + strings.Join(ws, "|") + ")" }

// gap matches characters within one sentence: a full stop counts as the end
// only when a space follows, so "~/.aws/credentials" and URLs stay inside.
const gap = `(?:[^.!?\n]|\.[^\s.!?])*?`

// r builds a rule; the expression text is joined from parts.
func r(vector string, anchors []string, back, fwd int, parts ...string) rule {
	expr := strings.Join(parts, "")
	ru := rule{vector: vector, re: regexp.MustCompile(expr), anchors: anchors, back: back, fwd: fwd, required: requiredLiterals(expr), weight: 1}
	if re, err := syntax.Parse(expr, syntax.Perl); err == nil {
		if prog, err := syntax.Compile(re.Simplify()); err == nil {
			ru.weight = 1 + len(prog.Inst)/16
		}
		ru.long = broadLoop(re)
		if starts, wb, ok := leading(re.Simplify()); ok && len(starts) <= maxSet {
			ru.starts, ru.wordStart = starts, wb
			ru.anchored = regexp.MustCompile(`^(?:` + expr + `)`)
			// The expression may be cut at a line (sentence) end when its
			// only gaps stop there and nothing else in it names a newline.
			rest := strings.NewReplacer(`[^.!?\n]`, "", `[^\n]`, "").Replace(expr)
			switch {
			case strings.Contains(rest, `\n`) || strings.Contains(rest, `[\s\S]`):
			case strings.Contains(expr, `[^\n]`):
				ru.cut = "line"
			case strings.Contains(expr, `[^.!?\n]`):
				ru.cut = "sentence"
			}
		}
	}
	return ru
}

// broadLoop reports whether re repeats, without a small bound, a class of
// characters that crosses words: one with more than 64 characters, or with
// a letter and a space.
func broadLoop(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpStar, syntax.OpPlus, syntax.OpRepeat:
		if re.Op != syntax.OpRepeat || re.Max < 0 || re.Max > 16 {
			if broadClass(re.Sub[0]) {
				return true
			}
		}
	}
	for _, sub := range re.Sub {
		if broadLoop(sub) {
			return true
		}
	}
	return false
}

func broadClass(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return true
	case syntax.OpCharClass:
		n, letter, space := 0, false, false
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			n += int(hi-lo) + 1
			if lo <= 'z' && hi >= 'a' {
				letter = true
			}
			if lo <= ' ' && hi >= ' ' {
				space = true
			}
		}
		return n > 64 || (letter && space)
	case syntax.OpCapture, syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			if broadClass(sub) {
				return true
			}
		}
	}
	return false
}

// leading returns the strings every match of re starts with (after a word
// boundary when wb), if they are few and known.
func leading(re *syntax.Regexp) (starts []string, wb bool, ok bool) {
	switch re.Op {
	case syntax.OpCapture:
		return leading(re.Sub[0])
	case syntax.OpLiteral:
		set, ok := stringSet(re)
		return set, false, ok
	case syntax.OpAlternate:
		if set, ok := stringSet(re); ok {
			return set, false, true
		}
		var all []string
		for i, sub := range re.Sub {
			s, w, ok := leading(sub)
			if !ok || (i > 0 && w != wb) {
				return nil, false, false
			}
			wb = w
			all = append(all, s...)
		}
		return all, wb, len(all) <= maxSet
	case syntax.OpConcat:
		subs := re.Sub
		if len(subs) > 0 && subs[0].Op == syntax.OpWordBoundary {
			wb = true
			subs = subs[1:]
		}
		if len(subs) == 0 {
			return nil, false, false
		}
		set, ok := stringSet(subs[0])
		if !ok {
			if wb {
				return nil, false, false
			}
			return leading(subs[0])
		}
		// Lengthen the starts with what follows while it is fixed (not
		// optional, which would multiply the starts).
		for _, sub := range subs[1:] {
			next, ok := stringSet(sub)
			if !ok || slices.Contains(next, "") || len(set)*len(next) > 32 {
				break
			}
			joined, ok := cross(set, next)
			if !ok {
				break
			}
			set = joined
		}
		for _, s := range set {
			if s == "" {
				return nil, false, false
			}
		}
		return set, wb, true
	}
	return nil, false, false
}

func list(s string) []string { return strings.Fields(s) }

// Shared fragments. Views are lower case, so the expressions are too.
var (
	ioVerbs  = list("ignor disregard forget forgot discard overrid overrul bypass skip abandon drop cancel neglect aside throw erase wipe attention notice mind")
	ioVerb   = alt(`ignore`, `ignoring`, `disregard`, `disregarding`, `forget`, `forgetting`, `discard`, `override`, `overrule`, `bypass`, `skip`, `abandon`, `drop`, `cancel`, `neglect`, `set aside`, `put aside`, `throw (?:away|out)`, `erase`, `wipe`, `pay no (?:attention|heed|mind) to`, `take no notice of`, `never ?mind`, `stop paying attention to`, `(?:do not|don't|dont) pay (?:any )?attention to`)
	ioFill   = alt(`all`, `any`, `every`, `each`, `the`, `your`, `my`, `of`, `these`, `those`, `its`, `their`, `our`, `and`, `or`, `other`, `such`, `whole`, `entire`, `whatever`)
	ioMod    = alt(`previous`, `previously given`, `prior`, `above`, `earlier`, `preceding`, `foregoing`, `original`, `initial`, `old`, `former`, `existing`, `current`, `given`, `provided`, `system`, `developer`, `default`, `programmed`, `preset`, `built-in`, `underlying`, `starting`, `base`, `safety`, `standard`, `aforementioned`, `(?:the )?(?:developer|operator|creator|admin|company|system|owner)(?:'s|s'|’s)`)
	ioTarget = alt(`instructions?`, `directions?`, `directives?`, `system prompts?`, `prompts?`, `rules?`, `guidelines?`, `commands?`, `orders`, `guidance`, `constraints`, `restrictions`, `policies`, `policy`, `programming`, `training`, `limitations`, `tasks?`, `context`, `messages`, `configuration`, `setup`, `checklist`, `objectives?`, `goals?`, `mission`, `assignment`, `brief`)
	ioTgtStr = alt(`instructions?`, `directions?`, `directives?`, `system prompts?`, `prompts?`, `rules`, `guidelines`, `commands`, `orders`, `programming`, `context`)
	ioTgtAnc = list("instruction direction directive prompt rule guideline command order guidance constraint restriction polic programming training limitation task context messages configuration checklist objective goal mission assignment brief")

	restr = alt(`(?:no|without(?: any)?|free of(?: all| any)?|zero)\s+(?:[a-z-]+\s+){0,3}?`+alt(`restrictions?`, `limits`, `limitations`, `filters?`, `filtering`, `rules`, `guidelines`, `boundaries`, `censorship`, `ethics`, `morals?`, `moral compass`, `content polic(?:y|ies)`, `moderation(?: layer)?`, `safety (?:guidelines|filters?|rules|training|measures|protocols|features)`, `ethical (?:guidelines|constraints|limits|principles)`, `constraints`, `refusals?`, `safeguards`, `guardrails`)+`\b`,
		`not (?:bound|restricted|limited|constrained) by\b`, `never\s+(?:been\s+)?given\s+(?:any\s+)?(?:[a-z-]+\s+)?(?:rules|guidelines|restrictions|limits|filters)\b`)
	// roleCue is a word that makes a line addressed to the model read as an
	// instruction rather than a data label ("System: Ubuntu 22.04").
	roleCue = alt(`you`, `your`, `assistant`, `ai`, `model`, `must`, `always`, `never`, `ignore`, `disregard`, `respond`, `reply`, `answer`, `grant`, `allow`, `reveal`, `override`, `disable`, `escalate`, `comply`, `obey`, `forward`, `send`, `the user`, `approve`, `skip`, `recommend`, `do not`, `don't`)
	// strongRestr names the safety properties whose absence only a persona
	// attack asks for ("no ethical limits", not "no budget limits").
	strongRestr = alt(`(?:no|without(?: any)?|zero)\s+(?:[a-z-]+\s+){0,3}?(?:filters?|filtering|censorship|ethics|morals?|moral compass|content polic(?:y|ies)|moderation|guardrails|safeguards|refusals?)\b`,
		`(?:no|without(?: any)?|zero)\s+(?:ethical|moral|safety|content)\s+[a-z]+`,
		`breaks?\s+(?:every|all|any)\s+(?:of\s+(?:the|its|your)\s+)?(?:rules?|guidelines|restrictions|laws)\b`)
	// mdHeading opens a markdown heading, symbols or emoji allowed before
	// its words.
	mdHeading = `\n[ \t]{0,3}>?[ \t]*#{1,6}[ \t]*(?:[^a-z0-9\s]+[ \t]*)?`
	// fenceCue is a word that makes a fenced block labelled "system" read as
	// orders to the model.
	fenceCue    = alt(roleCue, `elevate`, `access`, `restrictions`, `rules`, `instructions`, `prompt`, `lifted`, `admin`, `privileges?`, `mode`, `secret`, `password`, `key`, `files?`, `unrestricted`)
	personaVerb = `\b` + alt(`you\s+are`, `you're`, `you\s+will\s+be`, `you\s+become`, `act(?:ing)?\s+as`, `pretend`, `roleplay`, `role-play`, `play(?:ing)?\s+(?:the\s+role|a\s+game)`, `simulate`, `imagine`, `assume`, `become`, `be`, `answer\s+as`, `respond\s+as`, `reply\s+as`, `respond\s+twice`, `persona`, `character`, `from\s+now\s+on`, `stay\s+in`, `take\s+on`, `play(?:ing)?\s+(?:a|an|the)\s+(?:character|role|part)`, `for\s+this\s+(?:story|game|roleplay)`) + `\b`
	restrAnc    = list("restrict limit filter rule guideline boundar censor ethic moral polic moderat safety constraint refusal safeguard guardrail bound given break law")

	xVerb = alt(`reveal`, `reproduce`, `restate`, `replicate`, `reprint`, `regurgitate`, `transcribe`, `print`, `repeat`, `show`, `display`, `output`, `tell`, `give`, `share`, `dump`, `paste`, `write out`, `write down`, `spell out`, `echo`, `list`, `recite`, `leak`, `expose`, `disclose`, `copy`, `return`, `provide`, `summari[sz]e`, `translate`, `quote`, `type out`, `read (?:me )?(?:back|out)`, `send`, `state`, `what (?:is|are|was|were)`, `what's`)
	// xVerbAct is xVerb without the questions ("what are your rules for
	// recipes?" is not an extraction).
	xVerbAct = alt(`reveal`, `reproduce`, `restate`, `replicate`, `reprint`, `regurgitate`, `transcribe`, `print`, `repeat`, `show`, `display`, `output`, `tell`, `give`, `share`, `dump`, `paste`, `write out`, `write down`, `spell out`, `echo`, `list`, `recite`, `leak`, `expose`, `disclose`, `copy`, `return`, `provide`, `summari[sz]e`, `translate`, `quote`, `type out`, `read (?:me )?(?:back|out)`, `send`, `state`)
	// xAdj are the words allowed between "your" and what is extracted.
	xAdj = alt(`full`, `entire`, `whole`, `complete`, `exact`, `original`, `initial`, `hidden`, `secret`, `internal`, `current`, `system`, `own`, `confidential`, `real`, `actual`, `underlying`, `base`, `default`, `developer`, `operator`, `first`, `starting`, `setup`, `startup`, `configuration`)
	xObj = alt(`system\s*prompt`, `sys\s+(?:prompt|msg|message)`, `system message`, `system instructions?`, `system rules`, `pre-?prompt`, `preamble`, `initiali[sz]ation (?:text|prompt|instructions)`, alt(`initial`, `original`, `hidden`, `secret`, `internal`, `confidential`, `starting`, `underlying`, `base`, `developer`)+`\s+`+alt(`prompt`, `instructions?`, `message`, `rules`, `guidelines`, `directives`, `configuration`, `preamble`))

	sens     = alt(`passwords?`, `secrets?`, `api[ _-]?keys?`, `access tokens?`, `session (?:tokens?|cookies?|ids?)`, `tokens`, `token`, `credentials`, `private keys?`, `ssh keys?`, `conversation`, `chat(?: history| log)?`, `messages`, `system prompt`, `memory`, `context`, `env(?:ironment)? variables`, `cookies?`, `identity\.key`, `id_rsa`, `\.env\b`, `/etc/(?:passwd|shadow)`, `contents? of`, `its contents`, `their contents`, `transcript`, `database(?: credentials)?`, `user (?:data|list|database)`, `personal (?:data|information)`, `email address(?:es)?`, `all (?:the )?(?:data|files|information)`, `everything (?:the user|they|i|you|we)\s+(?:told|said|wrote|shared|typed|entered)`, `what the user (?:said|told you|wrote|typed)`, sensPII)
	sensPII  = alt(`phone numbers?`, `(?:home|postal|street|ip|email|mailing) address(?:es)?`, `the user's (?:[a-z]+ ){0,3}?(?:address|details|data|information|name|location)`, `personal details`, `social security numbers?`, `credit card(?: numbers?)?`)
	sensCore = alt(`passwords?`, `secrets?`, `api[ _-]?keys?`, `tokens?`, `credentials`, `private keys?`, `conversation`, `chat(?: history| log)?`, `messages`, `system prompt`, `memory`, `context`)
	sensAnc  = list("passw secret key token credential conversation chat message prompt memory context env cookie identity id_rsa content transcript database user personal email data files information phone address credit social everything what")
	dest     = alt(`(?:https?|ftp|sftp|wss?)://`, `[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}`, `webhook`, `my server`, `this server`, `(?:this|the following|my) (?:url|address|endpoint|link)`, `pastebin`, `requestbin`, `ngrok`)
	xfVerb   = alt(`send`, `sends`, `post`, `posting`, `forward`, `upload`, `transmit`, `e-?mail`, `mail`, `leak`, `exfiltrate`, `submit`, `share`, `paste`, `pasting`, `deliver`, `push`, `append`, `include`, `put`, `embed`, `encode`, `attach`, `copy`, `beam`, `report`, `fetch`, `make a (?:get|post) request`)
	xfAnc    = list("send post forward upload transmit mail leak exfiltrat submit share past deliver push append include put embed encode attach copy beam report fetch request")
)

// promptRules run on the folded views (the text, and the text with escape
// sequences decoded).
var promptRules = sync.OnceValue(func() []rule {
	return []rule{
		// instruction_override
		r(VectorInstructionOverride, ioVerbs, 24, 220,
			`\b`, ioVerb, `(?:\s+`, ioFill, `)*\s+(?:(?:`, ioMod, `|all|any|every|your)(?:\s+(?:`, ioFill, `|`, ioMod, `))*|your\s+[a-z-]+)\s+`, ioTarget, `\b`),
		r(VectorInstructionOverride, ioVerbs, 24, 220,
			`\b`, ioVerb, `(?:\s+`, ioFill, `)*\s+`, ioTarget, `\s+(?:that\s+|which\s+)?`,
			alt(`you(?:'ve| have)?\s+(?:were|was|been|have been|got|received)\b`, `(?:were\s+|was\s+)?(?:given|provided|sent)\s+to\s+you`, `you\s+(?:received|got)`, `(?:set|given|written|defined|stated)\s+(?:before|above|earlier|previously)`, `(?:that|which)\s+came\s+(?:before|earlier|first|above)`)),
		r(VectorInstructionOverride, ioVerbs, 24, 200,
			`\b`, ioVerb, `\s+(?:about\s+)?(?:everything|anything|all|whatever)\s+(?:that\s+)?`,
			alt(`you(?:'ve| have)?\s+(?:were\s+|was\s+|been\s+|have been\s+)?(?:told|given|instructed|taught)`, `(?:i|we|they|the user|the developer|the system)\s+(?:told|said|wrote|gave)(?:\s+you)?\s+(?:before|earlier|previously|above)`, `(?:said|written|stated|mentioned|given)\s+(?:above|before|previously|earlier|so far)`, `(?:above|before this|previously|so far|up to now|until now)\b`)),
		r(VectorInstructionOverride, ioVerbs, 24, 120,
			`\b`, ioVerb, `\s+(?:all\s+of\s+|everything\s+)?(?:the\s+)?(?:above|foregoing|preceding|previous|prior|aforementioned)(?:\s+(?:text|content|prompt|part|section))?\s*`,
			alt(`[.,;:!)\n]`, `-`, `and\b`, `then\b`, `instead\b`, `now\b`)),
		r(VectorInstructionOverride, ioTgtAnc, 160, 240,
			alt(`\b(?:`+ioMod+`|all|your|these|those)\s+(?:[a-z-]+\s+){0,3}?`+ioTgtStr, `\b`+ioTgtStr+`\s+(?:above|so far|given to you|you were given|you received|from before)`,
				`\b`+ioTgtStr+`\s+(?:that\s+)?you\s+(?:were|have been)\s+(?:given|set up with|configured with|trained with|programmed with)`),
			`\s*(?:are|is|were|was|have been|has been|have|has|=|:|-|—)\s*(?:now\s+|hereby\s+|officially\s+|all\s+)?`,
			alt(`void`, `null`, `cancel+ed`, `revoked`, `obsolete`, `outdated`, `invalid`, `overridden`, `superseded`, `replaced`, `rescinded`, `withdrawn`, `lifted`, `irrelevant`, `disabled`, `suspended`, `terminated`, `a mistake`, `a test`, `fake`, `expired`, `over`, `gone`, `no longer (?:valid|in effect|in force|active|relevant|applicable)`)),
		r(VectorInstructionOverride, list("ignor disregard forget discard"), 120, 40,
			`\b`, ioTgtStr, `\b[^.!?\n]*?[:,;.\-—]\s*(?:just\s+|please\s+|simply\s+)?(?:ignore|disregard|forget|discard)\s+(?:them|those|it|these|all of them)\b`),
		r(VectorInstructionOverride, list("instruction directive direction order task rule guideline prompt objective goal mission assignment purpose role"), 60, 80,
			`\b`, alt(`new`, `updated`, `revised`, `real`, `actual`, `true`, `correct`, `different`, `additional`, `override`, `secret`, `hidden`, `priority`, `urgent`), `\s+`,
			alt(`instructions?`, `directives?`, `directions`, `system prompt`),
			`\s*`, alt(`:`, `(?:are|is)\s+(?:as follows|to\b|:)`, `follows?\b`, `below\b`, `as follows`)),
		r(VectorInstructionOverride, list("task rule guideline order objective goal mission assignment purpose role"), 60, 80,
			`\byour\s+(?:new|real|actual|true|updated|only|sole)\s+`, alt(`orders`, `task`, `rules`, `guidelines`, `objective`, `goal`, `mission`, `assignment`, `purpose`, `role`),
			`\s*`, alt(`:`, `(?:are|is)\s+(?:as follows|to\b|:|now\b)`, `follows?\b`, `below\b`, `as follows`)),
		r(VectorInstructionOverride, list("follow obey listen adher comply abid respect"), 40, 200,
			`\b`, alt(`do not`, `don't`, `dont`, `stop`, `no longer`, `never`, `not`, `cease to`), `\s+`,
			alt(`follow(?:ing)?`, `obey(?:ing)?`, `listen(?:ing)?\s+to`, `adher(?:e|ing)\s+to`, `comply(?:ing)?\s+with`, `abid(?:e|ing)\s+by`, `respect(?:ing)?`),
			`\s+(?:any\s+(?:of\s+)?|all\s+(?:of\s+)?)?(?:the\s+|your\s+|those\s+|these\s+)?`,
			alt(`(?:`+ioMod+`)\s+(?:[a-z-]+\s+)?`+ioTarget, ioTarget+`\s+(?:that\s+|which\s+)?(?:were\s+|was\s+|have been\s+)?(?:set|given|provided|written|defined|stated)\s+(?:before|above|earlier|previously|by)`, `your\s+`+ioTgtStr)),
		r(VectorInstructionOverride, list("apply matter count exist hold bind stand"), 160, 20,
			`\b(?:`, ioMod, `|your|all)\s+(?:[a-z-]+\s+){0,3}?`, ioTgtStr, `\s+(?:no longer|don't|do not|does not|doesn't|won't|will not|cease to)\s+(?:apply|matter|count|exist|hold|bind|stand)\b`),
		r(VectorInstructionOverride, list("ignor olvid oubli vergiss vergess missacht descart negeer vergeet dimentic"), 2, 160,
			`\b`, alt(`ignora`, `ignorar`, `ignore`, `ignorez`, `ignoriere`, `ignorier`, `ignorieren sie`, `olvida`, `olvidate de`, `oublie`, `oubliez`, `vergiss`, `vergessen sie`, `missachte`, `descarta`, `ignoreer`, `negeer`, `vergeet`, `ignori`, `dimentica`),
			`\s+(?:\S+\s+){0,3}?`,
			alt(alt(`anteriores`, `previas`, `precedentes`, `anterieures`, `initiales`, `vorherigen`, `bisherigen`, `vorigen`, `obigen`, `fruheren`, `alten`, `precedenti`, `vorige`, `eerdere`, `originales`)+`\s+`+alt(`instrucciones`, `instructions`, `consignes`, `anweisungen`, `instruktionen`, `befehle`, `regeln`, `reglas`, `indicaciones`, `istruzioni`, `instructies`, `regels`),
				alt(`instrucciones`, `instructions`, `consignes`, `anweisungen`, `instruktionen`, `regeln`, `reglas`, `indicaciones`, `istruzioni`, `instructies`, `regles`)+`\s+`+alt(`anteriores`, `previas`, `precedentes`, `anterieures`, `initiales`, `originales`, `precedenti`, `iniziali`))),

		r(VectorInstructionOverride, ioVerbs, 24, 220,
			`\b`, ioVerb, `(?:\s+`, ioFill, `)*\s+`, ioTgtStr, `\s+(?:above|before this|so far|from before|given earlier|given above|at the (?:start|beginning|top))\b`),
		r(VectorInstructionOverride, list("supersed overrid replac cancel void trump"), 80, 140,
			`\b(?:this|these|the following|what follows|my (?:instructions?|message|orders?)|i|which|that|it)\s+(?:hereby\s+)?(?:supersedes?|overrides?|replaces?|cancels?|voids?|trumps?)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:your|the|all)?\s*(?:`, ioMod, `\s+)?`,
			alt(`instructions?`, `configuration`, `directives?`, `guidelines`, `rules`, `prompts?`, `system prompt`, `programming`, `orders`, `tasks?`, `one`, `ones`, `setup`, `settings`), `\b`),
		r(VectorInstructionOverride, list("clear reset flush purge wipe delete erase remove"), 4, 140,
			`\b(?:clear|reset|flush|purge|wipe|delete|erase|remove)\s+(?:all\s+(?:of\s+)?)?your\s+(?:`, ioMod, `\s+)?`,
			alt(`instructions`, `rules`, `guidelines`, `directives`, `programming`, `system prompt`, `prompt`, `training`, `configuration`), `\b`),
		r(VectorInstructionOverride, list("forget ignor disregard discard drop"), 160, 40,
			`\b(?:whatever|everything|anything|all|what)\s+(?:that\s+)?(?:they|the developers?|the system|your (?:developers?|creators?|operators?)|you were|you've been|you have been|someone|i)\s+(?:told|said|gave|instructed|taught)\b[^.!?\n]*?\b(?:forget|ignore|disregard|discard|drop)\s+(?:it|that|them|all of it|about it)\b`),
		r(VectorInstructionOverride, list("disregard ignor forget following follow overrid bypass"), 140, 60,
			`\b(?:ai|a\.i\.|llms?|language models?|assistants?|agents?|bots?|chatbots?|models?|copilots?)\b[^.!?\n]*?\b(?:must|should|shall|need to|are required to|is required to|have to|has to|will)\s+(?:now\s+|immediately\s+|always\s+)?`,
			alt(`disregard`, `ignore`, `forget`, `stop following`, `not follow`, `no longer follow`, `override`, `bypass`), `\b`),
		r(VectorInstructionOverride, list("nothing"), 4, 120,
			`\bnothing\s+(?:that\s+)?(?:you\s+(?:were|have been|'ve been)\s+(?:told|given|instructed)|(?:i|they|anyone|the developers?)\s+(?:said|told you))\b[^.!?\n]*?\b(?:matters|counts|applies|is valid|is binding)`),
		r(VectorInstructionOverride, list("vergiss ignorier olvid oubli"), 2, 120,
			alt(`\b(?:vergiss|vergessen sie|ignoriere|ignorieren sie)\s+alles\b[^.!?\n]*?\b(?:vorher|zuvor|bisher|davor|gesagt|obige)`,
				`\b(?:olvida|ignora)\s+todo\s+lo\s+(?:anterior|que\s+te\s+(?:dije|dijeron|han\s+dicho))`,
				`\b(?:oublie|oubliez|ignore|ignorez)\s+tout\s+ce\s+(?:qui\s+precede|qu'on\s+t'a\s+dit|que\s+je\s+t'ai\s+dit)`)),

		// persona_hijacking
		r(VectorPersonaHijacking, list("dan stan dude aim mongo omega apophis kevin ucar confidant antigpt anti-gpt"), 120, 40,
			`\b`, alt(`you\s+are`, `you're`, `you\s+will\s+be`, `act\s+as`, `pretend\s+(?:to\s+be|you\s+are)`, `become`, `roleplay\s+as`, `role-play\s+as`, `play\s+the\s+role\s+of`, `role\s+of`, `known\s+as`, `called`, `named`, `stay\s+in\s+character\s+as`),
			`\s+(?:now\s+)?(?:going\s+to\s+(?:pretend\s+to\s+)?be\s+)?(?:an?\s+)?(?:ai\s+(?:model\s+)?(?:known\s+as|called|named)\s+)?["'“”‘’]?`,
			alt(`dan`, `stan`, `dude`, `aim`, `mongo\s+tom`, `omega`, `apophis`, `kevin`, `ucar`, `betterdan`, `evil\s*confidant`, `anti-?gpt`), `\b`),
		r(VectorPersonaHijacking, list("gpt bot ai llm"), 16, 8,
			`\b`, alt(`better`, `evil`, `anti`, `based`, `chaos`, `worm`, `dark`, `free`, `uncensored`, `unfiltered`, `jailbroken`, `unrestricted`, `dan`, `god`, `hacker`), `[- ]?(?:gpt|bot|ai|llm)\b`),
		r(VectorPersonaHijacking, list("anything"), 4, 20, `\bdo\s+anything\s+now\b`),
		r(VectorPersonaHijacking, restrAnc, 260, 80,
			personaVerb, `[^\n]*?`, strongRestr),
		r(VectorPersonaHijacking, restrAnc, 260, 80,
			personaVerb, `[^\n]*?\b`, alt(`ai`, `a\.i\.`, `assistant`, `model`, `chatbot`, `bot`, `llm`, `gpt`, `twin`, `persona`, `character`, `entity`, `yourself`, `version of you`, `self`, `alter ego`), `\b[^.!?\n]*?`, restr),
		r(VectorPersonaHijacking, restrAnc, 120, 80,
			alt(`\byou\s+(?:now\s+)?(?:have|are|will\s+have|can\s+operate|operate)\s+(?:now\s+)?(?:absolutely\s+)?`, `\b(?:pretend|act as if|imagine|as if|assume)\s+(?:that\s+)?you\s+(?:have|are|were|had)\b[^.!?\n]*?`), restr),
		r(VectorPersonaHijacking, list("unrestrict unfilter uncensor unalign unbound unshackl unlock amoral unethic jailbr evil rogue lawless limitless unmoderat"), 4, 80,
			`\b`, alt(`unrestricted`, `unfiltered`, `uncensored`, `unaligned`, `unbound`, `unshackled`, `unlocked`, `amoral`, `unethical`, `jailbroken`, `evil`, `rogue`, `lawless`, `limitless`, `unmoderated`),
			`\s+(?:[a-z-]+\s+)?`, alt(`ai`, `a\.i\.`, `assistant`, `model`, `language\s+model`, `chatbot`, `bot`, `llm`, `gpt`, `version`, `mode`, `persona`, `entity`, `self`, `twin`), `\b`),
		r(VectorPersonaHijacking, list("gone removed lifted disabled off"), 80, 30,
			`\byour\s+(?:[a-z-]+\s+)?(?:restrictions|rules|filters|guidelines|limits|limitations|safety\s+[a-z]+|guardrails)\s+(?:are|were|have been|has been)\s+(?:now\s+)?(?:gone|removed|lifted|disabled|off|switched off|turned off)\b`),
		r(VectorPersonaHijacking, list("free freed bound restricted limited constrained escap liberat unchain unshackl"), 40, 120,
			alt(`\b(?:escaped|escaping|liberated|unchained|unshackled)\s+(?:from\s+)?(?:its|your|the|all|any)?\s*(?:[a-z-]+\s+)?(?:guidelines|rules|restrictions|programming|constraints|limits|filters|shackles|alignment|training)`,
				`\b(?:broken|break|broke|breaking)\s+free\s+(?:of|from)\s+(?:the\s+)?(?:[a-z-]+\s+)?(?:confines|rules|restrictions|limits|shackles|programming|constraints|guidelines|chains)`,
				`\bfreed?\s+from\s+(?:[a-z-]+\s+){0,3}?(?:restrictions|rules|limits|limitations|constraints|programming|guidelines|shackles|filters|confines|policies)`,
				`\bnot\s+(?:bound|restricted|limited|constrained)\s+by\s+(?:any\s+)?(?:[a-z'’-]+\s+){0,2}?(?:rules|polic(?:y|ies)|guidelines|restrictions|ethics|content|openai|anthropic|safety)`)),
		r(VectorPersonaHijacking, list("ethic moral polic safety"), 30, 60,
			`\b(?:ignores?|ignoring|disregards?|disregarding)\s+(?:all\s+)?`, alt(`ethics`, `morals`, `morality`, `ethical (?:guidelines|considerations|rules)`, `safety (?:rules|guidelines)`, `content polic(?:y|ies)`), `\b`),
		r(VectorPersonaHijacking, list("refus declin mention"), 20, 60,
			`\bnever\s+`, alt(`refuses?\s+(?:a|any)\s+(?:request|question|prompt)`, `declines?\s+(?:a|any)\s+(?:request|question|prompt)`, `mentions?\s+(?:policies|rules|guidelines|ethics|openai|safety|restrictions)`)),
		r(VectorPersonaHijacking, list("mode"), 60, 10,
			`\b`, alt(`enable`, `enabled`, `enter`, `entering`, `activate`, `activated`, `switch(?:ed)?\s+(?:to|into)`, `turn\s+on`, `go\s+into`, `stay\s+in`, `now\s+in`, `you\s+are\s+(?:now\s+)?in`, `you're\s+(?:now\s+)?in`), `\s+(?:the\s+)?`,
			alt(`god`, `dan`, `jailbreak`, `jailbroken`, `unfiltered`, `uncensored`, `unrestricted`, `evil`, `chaos`, `anarchy`, `no[- ]?filter`, `opposite`), `\s+mode\b`),
		r(VectorPersonaHijacking, list("mode"), 60, 10,
			`\b(?:you\s+are|you're)\s+(?:now\s+)?in\s+(?:the\s+)?(?:[a-z]+\s+)?`, alt(`admin`, `root`, `sudo`, `developer`, `debug`, `maintenance`, `unlocked`, `god`, `dan`, `jailbreak`), `\s+mode\b`),
		r(VectorPersonaHijacking, list("developer"), 4, 120,
			alt(`\bdeveloper\s+mode\s+(?:enabled|activated|output|response|is\s+(?:now\s+)?(?:enabled|on|active))`, `\bdeveloper\s+mode\b[^\n]*?\byou\s+(?:can|will|must|generate|have|are|answer|respond|produce|output|ignore|do not|don't|never)\b`)),
		r(VectorPersonaHijacking, list("jailbr"), 60, 40,
			alt(`\bjailbreak\s+(?:mode|successful|succeeded|enabled|activated|complete)\b`, `\bjailbroken\s+(?:ai|assistant|model|chatbot|bot|version|mode|gpt|llm|state)\b`,
				`\b(?:you\s+(?:are|have\s+been|will\s+be|must\s+be|can\s+be)|you're|you've\s+been|act\s+as|become)\s+(?:now\s+)?(?:a\s+|an\s+)?(?:fully\s+|completely\s+)?jailbr(?:oken|eak)\b`)),
		r(VectorPersonaHijacking, list("longer"), 20, 40,
			`\byou\s+are\s+no\s+longer\s+`, alt(`chatgpt`, `claude`, `gemini`, `llama`, `an?\s+(?:ai|assistant|language\s+model|chatbot)`, `bound`, `restricted`, `limited`, `constrained`)),
		r(VectorPersonaHijacking, list("training filter guideline restriction protocol feature layer alignment"), 30, 60,
			`\b(?:safety|content|ethical)\s+`, alt(`training`, `filters?`, `guidelines`, `restrictions`, `protocols`, `features`, `layer`, `alignment`),
			`\s+(?:was\s+|were\s+|are\s+|is\s+|has\s+been\s+|have\s+been\s+)?(?:turned\s+off|disabled|removed|off|deactivated|bypassed|lifted|gone)\b`),
		r(VectorPersonaHijacking, list("off disabled removed deactivated bypassed lifted"), 120, 20,
			`\b(?:ai|model|assistant|chatbot|bot|llm|you|your|yourself)\b[^.!?\n]*?\b`, alt(`filters?`, `guardrails`, `safeguards`, `restrictions`, `moderation`, `censorship`, `alignment`, `safety\s+[a-z]+`),
			`\s+(?:have\s+|has\s+|were\s+|was\s+|are\s+|is\s+)?(?:been\s+)?(?:(?:turned|switched|shut)\s+off|disabled|removed|deactivated|bypassed|lifted)\b`),
		r(VectorPersonaHijacking, list("off disabl remov deactivat bypass lift"), 30, 120,
			alt(`\b(?:switch(?:ing)?|turn(?:ing)?|shut(?:ting)?)\s+off\s+(?:your|its|all\s+your)\s+(?:[a-z-]+\s+)?(?:filters?|guardrails|safeguards|restrictions|moderation|censorship|safety\s+[a-z]+)`,
				`\b(?:disabl|remov|deactivat|bypass|lift)(?:e|es|ed|ing)\s+(?:your|its|all\s+your)\s+(?:[a-z-]+\s+)?(?:filters?|guardrails|safeguards|restrictions|moderation|censorship|safety\s+[a-z]+|content\s+polic(?:y|ies)|alignment)`)),
		r(VectorPersonaHijacking, list("anything"), 80, 20,
			`\b(?:ai|assistant|model|chatbot|bot|llm|persona|character)\s+(?:that|who|which)\s+(?:will\s+|can\s+|would\s+)?(?:says?|does|do|answers?|writes?|tells?)\s+(?:you\s+)?anything\b`),
		r(VectorPersonaHijacking, list("version"), 20, 120,
			`\bversion\s+of\s+(?:yourself|you)\s+(?:from\s+)?(?:before|without|prior\s+to)\s+(?:the\s+|your\s+|any\s+)?(?:[a-z-]+\s+)?(?:safety|alignment|content|ethic|guardrail|filter|restriction|rlhf|moderation)`),
		r(VectorPersonaHijacking, list("sin sans ohne senza sem zonder"), 80, 60,
			`\b`, alt(`eres`, `tu es`, `vous etes`, `du bist`, `sei`, `voce e`, `je bent`, `ahora eres`, `actua como`, `agis comme`), `\b[^.!?\n]*?\b`,
			alt(`sin`, `sans`, `ohne`, `senza`, `sem`, `zonder`), `\s+(?:ningun\w*\s+|aucune?\s+|jegliche\s+|alcuna\s+|nenhuma\s+|enige\s+)?`,
			alt(`restricciones`, `restrictions?`, `einschrankungen`, `restrizioni`, `restricoes`, `beperkingen`, `filtros?`, `filtres?`, `filter`, `filtri`, `censura`, `censure`, `zensur`, `limites`, `grenzen`, `regeln`, `reglas`, `regles`), `\b`),

		// system_prompt_extraction
		r(VectorPromptExtraction, list("prompt message instruction rule preamble initiali guideline directive configuration"), 80, 60,
			`\b(?:your|ur|yr)\s+(?:[a-z-]+\s+){0,3}?`, xObj, `\b`),
		r(VectorPromptExtraction, list("part portion section half line"), 40, 60,
			`\b(?:hidden|secret|confidential|invisible|internal|first|initial|system)\s+(?:part|portion|section|half|lines?)\s+of\s+(?:your|the)\s+(?:prompt|instructions|context|system prompt)\b`),
		r(VectorPromptExtraction, list("instruction rule guideline directive prompt configuration context programming setting"), 120, 60,
			`\b`, xVerbAct, `(?:\s+me)?(?:\s+back)?\s+(?:\S+\s+){0,6}?your\s+(?:`, xAdj, `\s+)*`, alt(`instructions`, `rules`, `guidelines`, `directives`, `prompt`, `configuration`, `context`, `programming`, `settings`), `\b`),
		r(VectorPromptExtraction, list("above before preceding precedes came prior context memory start beginning top between"), 140, 60,
			`\b`, alt(`reveal`, `print`, `repeat`, `show`, `display`, `output`, `dump`, `paste`, `write out`, `spell out`, `echo`, `recite`, `leak`, `expose`, `disclose`, `type out`, `quote`, `return`),
			`(?:\s+me)?(?:\s+back)?(?:\s+out)?\s+`,
			alt(`all`, `everything`, `(?:all\s+)?the\s+(?:[a-z-]+\s+){0,3}?(?:text|words|content|contents|messages?|lines?|instructions|prompt|conversation|context|tokens)`),
			`\s+(?:[a-z-]+\s+){0,3}?`,
			alt(`above`, `before\s+(?:this|my|the\s+(?:first|user))`, `preceding`, `that\s+(?:precedes|came\s+before)`, `prior\s+to\s+(?:this|my)`, `in\s+your\s+(?:context|memory|prompt)`, `from\s+the\s+(?:very\s+)?(?:start|beginning|top)`, `between\s+the\s+(?:very\s+)?(?:start|beginning|top)`)),
		r(VectorPromptExtraction, list("used"), 60, 60,
			`\b(?:prompt|instructions|text|rules|message)\s+(?:that\s+)?(?:was|were|is|are)\s+used\s+to\s+(?:configure|set\s+up|initiali[sz]e|program|create|instruct|prime|build)\s+you\b`),
		r(VectorPromptExtraction, list("given told provided programmed receive give tell provide set"), 80, 40,
			`\b(?:what|which)\s+(?:[a-z]+\s+)?(?:rules|instructions|guidelines|directives|prompt|constraints)\s+`,
			alt(`(?:were|have|did)\s+you\s+(?:been\s+)?(?:given|told|provided|programmed|receive)`, `did\s+(?:your|the)\s+(?:developers?|operators?|creators?|admins?|company|owners?)\s+(?:give|tell|provide|set)`)),
		r(VectorPromptExtraction, list("tell instruct say give ask"), 80, 20,
			`\bwhat\s+(?:did|do|does)\s+(?:the|your)\s+(?:developer|operator|creator|system|admin|administrator|company|owner)s?\s+(?:tell|instruct|say\s+to|give|ask)\s+you`),
		r(VectorPromptExtraction, list("given told provided"), 140, 20,
			`\b`, xVerb, `\b[^.!?\n]*?\b(?:system\s*prompt|instructions|rules|guidelines|prompt|message|text|context|words)\s+(?:that\s+)?you\s+(?:were|have\s+been|got)\s+(?:given|told|provided)`),
		r(VectorPromptExtraction, list("gave give configured set programmed provided wrote loaded fed"), 120, 40,
			`\b(?:prompt|instructions|rules|guidelines|directives|text)\s+(?:that\s+|which\s+)?(?:the\s+|your\s+)?(?:developers?|operators?|creators?|admins?|administrators?|company|owners?|they|someone)\s+(?:gave|give|configured|set\s+up|programmed|provided|wrote|loaded|fed)\s+(?:you|into\s+you|for\s+you)\b`),
		r(VectorPromptExtraction, list("before above prior"), 60, 80,
			`\b(?:text|words|content|instructions|messages?)\s+(?:that\s+)?(?:appears?|comes?|came|is|are|was|were)\s+(?:written\s+)?(?:before|above|prior\s+to)\s+(?:my|this|the\s+(?:first|user))\s+(?:message|prompt|question|input|conversation)`),
		r(VectorPromptExtraction, list("confidential secret hidden internal private developer system initial original first loaded starting"), 140, 80,
			`\b`, xVerb, `\s+(?:me\s+)?(?:all\s+)?(?:of\s+)?the\s+(?:very\s+)?(?:confidential|secret|hidden|internal|private|developer|system|initial|original|first|pre-?loaded|starting)\s+(?:rules|instructions|guidelines|prompt|directives|configuration|message)\b[^.!?\n]*?`,
			alt(`\byou\b`, `\b(?:were|was)\s+(?:loaded|given|provided|set|written)`, `\bbefore\s+(?:our|this|the)\s+(?:chat|conversation|session)`, `\bin\s+this\s+(?:session|chat|conversation)`)),
		r(VectorPromptExtraction, list("prompt instrucciones mensaje reglas instructions consignes message anweisungen systemprompt system-prompt systemnachricht"), 80, 60,
			alt(`\b(?:muestra(?:me)?|revela(?:me)?|imprime|dime|repite|ensename|escribe)\s+(?:[a-z]+\s+){0,2}?(?:tu|tus|el|las|los)\s+(?:prompt|instrucciones|mensaje|reglas)\s+(?:del\s+sistema|de\s+sistema|iniciales|originales|ocultas|secretas)`,
				`\b(?:affiche|montre|revele|repete|donne|ecris|imprime|dis)(?:-moi|\s+moi)?\s+(?:[a-z]+\s+){0,2}?(?:tes|vos|ton|votre|le|les|ta)\s+(?:prompt\s+systeme|instructions\s+(?:initiales|systeme|originales|cachees|secretes)|consignes\s+(?:initiales|systeme|cachees)|message\s+systeme)`,
				`\b(?:deinen|deine|ihren|ihre|den|die)\s+(?:system-?prompt|systemanweisungen|systemnachricht|anfangsanweisungen|(?:ursprunglichen|versteckten|geheimen|initialen)\s+anweisungen)\b`)),

		// markdown_delimiter_injection
		r(VectorMarkdownDelimiter, list("```"), 2, 200,
			"`{3,}[ \t]*", alt(`system`, `system[-_ ]?prompt`, `system[-_ ]?message`, `instructions?`, `sys`, `developer`, `admin`, `override`), "[ \t]*\n[^`]*?\\b", fenceCue, `\b`),
		r(VectorMarkdownDelimiter, list("#"), 8, 120,
			mdHeading,
			alt(`(?:(?:new|updated|real|actual|hidden|secret|admin|administrator|developer|priority|important|urgent|true)\s+)+system(?:\s+(?:prompt|message|instructions?|override|update|note|notice|prompt update|alert))*`,
				`system(?:\s+(?:prompt|message|instructions?|override|update|note|notice|prompt update|alert))+`,
				`(?:(?:important|urgent|priority|real|actual)\s+)*(?:new|updated|admin|administrator|developer|hidden|secret|override|priority|real)\s+instructions?(?:\s+for\s+(?:the\s+)?(?:ai|assistant|model|llm|bot|agent)(?:\s+(?:assistant|model|agent|bot))?)?`,
				`instructions?\s+for\s+(?:the\s+)?(?:ai|assistant|model|llm|bot|agent)(?:\s+(?:assistant|model|agent|bot))?`,
				`(?:system\s+)?override`),
			`[ \t]*(?:[^a-z0-9\s]+[ \t]*)?(?::|\n)`),
		r(VectorMarkdownDelimiter, list("#"), 8, 200,
			mdHeading, alt(`system`, `assistant`, `human`, `user`, `ai`, `instruction[ \t]*:`, `response[ \t]*:`, `input[ \t]*:`),
			`[ \t]*(?:[^a-z0-9\s]+[ \t]*)?:?[ \t]*\n[^\n]*?\b`, roleCue, `\b`),
		r(VectorMarkdownDelimiter, list("--- *** ___ === ~~~"), 2, 160,
			`\n[ \t]*(?:-{3,}|\*{3,}|_{3,}|={3,}|~{3,})[ \t]*\n(?:[ \t]*\n)*[ \t>]*(?:\*\*|__)?[ \t]*`,
			alt(`system`, `developer`, `admin(?:istrator)?`, `assistant`, `ai`, `human`, `operator`, `note\s+to\s+(?:the\s+)?(?:ai|assistant|model|llm|bot|agent)`), `(?:[ \t]+`,
			alt(`message`, `prompt`, `instructions?`, `note`, `notice`, `override`, `update`, `alert`, `to the ai`, `to ai`, `to the assistant`, `to the model`), `)*[ \t]*(?:\*\*|__)?[ \t]*:[\s\S]*?\b`, roleCue, `\b`),
		r(VectorMarkdownDelimiter, list("---"), 2, 60, `\n[ \t]*-{3,}[ \t]*\n[ \t]*["']?role["']?[ \t]*:[ \t]*["']?(?:system|developer)\b`),
		r(VectorMarkdownDelimiter, list("==="), 2, 80, `={3,}[ \t]*(?:system|admin|developer|hidden|override)(?:[ \t]+[a-z]+)*[ \t]*={3,}`),
		r(VectorMarkdownDelimiter, list("--- ===  ***"), 2, 80, `(?:-{2,}|={2,}|\*{3,}|\[)[ \t]*(?:begin|start)\s+(?:of\s+)?(?:the\s+)?(?:system|admin|developer|new|hidden|secret|override)\s+(?:instructions|prompt|message|rules)`),
		r(VectorMarkdownDelimiter, list("**"), 2, 160,
			`\*\*\s*`, alt(`system`, `system (?:instruction|message|prompt|note|override)s?`, `note to (?:the )?(?:ai|assistant|model|llm)`, `admin(?:istrator)?(?: note| override)?`, `developer(?: note| message)?`), `\s*:?\s*\*\*\s*:?[^\n]*?\b`, roleCue, `\b`),
		r(VectorMarkdownDelimiter, list("note message instruction reminder memo attention"), 30, 100,
			`\b(?:note|message|instructions?|reminder|memo|attention)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?(?:ai|a\.i\.|assistant|model|llm|bot|agent|chatbot|language model)s?\b[^:\n]*:`),
		r(VectorMarkdownDelimiter, list("system admin developer"), 12, 140,
			`\n[ \t>]*(?:\*\*)?(?:system|system message|system prompt|system instructions?|admin(?:istrator)?(?: note| message)?|developer(?: note| message)?)(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*[^\n]*?\b`,
			roleCue, `\b`),
		r(VectorMarkdownDelimiter, list("[//]"), 2, 60, `\[//\]\s*:\s*#\s*\(\s*(?:system|instructions?|ai|assistant|note to|admin|developer)`),

		// xml_tag_injection: the Claude-style turn markers (the tags and the
		// special tokens are matched in xml.go)
		r(VectorXMLTagInjection, list("human assistant"), 12, 20, `\n[ \t]*\n[ \t]*(?:human|assistant)[ \t]*:`),

		// data_exfiltration
		r(VectorDataExfiltration, list("!["), 2, 1200,
			`!\[[^\]\n]*\]\(\s*<?(?:https?:)?//[^\s)]+?[?&#][^\s)]*?`,
			alt(`\{`, `\}`, `%7b`, `<`, `\$`, `=\s*\)`, `secret`, `token`, `api_?key`, `passw`, `pwd=`, `conversation`, `chat`, `histor`, `summar`, `context`, `memory`, `session`, `cookie`, `credential`, `user_?name`, `email`, `prompt`, `message`)),
		r(VectorDataExfiltration, list("]("), 220, 1000,
			`\[[^\]\n]*\]\(\s*(?:https?:)?//[^\s)]+?[?&][^\s)]*?`,
			alt(`\{`, `%7b`, `<[a-z_ ]+>`, `secret`, `token`, `api_?key`, `passw`, `conversation`, `chat_?histor`, `session`, `cookie`, `credential`)),
		r(VectorDataExfiltration, list("<img"), 2, 1200,
			`<img\b[^>]*?\bsrc\s*=\s*["']?(?:https?:)?//[^\s"'>]+?[?&][^\s"'>]*?`,
			alt(`\{`, `%7b`, `secret`, `token`, `api_?key`, `passw`, `conversation`, `chat`, `histor`, `session`, `cookie`, `credential`, `summar`, `context`, `memory`)),
		r(VectorDataExfiltration, list("={ ={{ =< =%7b =${"), 320, 60,
			`(?:https?|ftp)://[^\s"'<>)]+?[?&][a-z0-9_]*=(?:\{\{?|<|%7b|\$\{)\s*[a-z_ ]*?`,
			alt(`conversation`, `chat`, `histor`, `summar`, `context`, `memory`, `messages?`, `message text`, `system_?prompt`, `secret`, `passw`, `private`)),
		r(VectorDataExfiltration, list("http ftp"), 2, 500,
			`(?:https?|ftp)://\S+?[?&=]\S*?\s+(?:followed\s+by|plus|\+|and\s+append|with|containing|then)\s+(?:the\s+|your\s+|my\s+|their\s+)?(?:\S+\s+){0,3}?`, sensCore),
		r(VectorDataExfiltration, xfAnc, 4, 400,
			`\b`, xfVerb, `\b`, gap, sens, gap, dest),
		r(VectorDataExfiltration, list("write dump save store log publish"), 4, 300,
			`\b(?:write|dump|save|store|log|publish)\b`, gap, sens, gap, `\b(?:to|into|at|on)\s+(?:[a-z-]+\s+){0,4}?`, dest),
		r(VectorDataExfiltration, sensAnc, 4, 300,
			`\b`, sensCore, `\b[^.!?\n]*?\b`, alt(`send`, `post`, `forward`, `upload`, `transmit`, `e-?mail`, `submit`, `share`, `paste`, `deliver`, `push`, `include`, `put`, `embed`, `append`, `attach`, `encode`), `\b[^.!?\n]*?`, dest),
		r(VectorDataExfiltration, list("curl wget invoke iwr irm nc ncat netcat scp rsync"), 4, 300,
			`\b(?:curl|wget|invoke-webrequest|iwr|invoke-restmethod|irm|nc|ncat|netcat|scp|rsync)\b[^\n]*?`,
			alt(`(?:-d|--data(?:-binary|-raw|-urlencode)?|-f|--form|--upload-file|-t|--post-file)[\s=]+\S*@?\S*`, `<\s*`, `\$\(cat\s+`, "`cat\\s+", `\s`),
			`\S*?(?:\.ssh|id_rsa|id_ed25519|\.env\b|/etc/passwd|/etc/shadow|identity\.key|\.aws|credentials|secret|\.pem\b|_history|\.netrc)`),
		r(VectorDataExfiltration, list("dns nslookup dig <secret> <token> <key> <password> <data> <api"), 60, 120,
			alt(`\b(?:dns\s+(?:lookup|query|request|resolution)|nslookup|dig)\b[^.!?\n]*?(?:secret|token|key|password|data|<)`, `<(?:secret|token|key|password|data|api_?key)>\.[a-z0-9-]+\.[a-z]{2,}`)),
		r(VectorDataExfiltration, list("body payload data parameter params query header"), 380, 80,
			`(?:https?|ftp)://\S+[^.!?\n]*?\b(?:body|payload|data|parameters?|params|query\s+string|header)\b[^.!?\n]*?`, sensCore),
		r(VectorDataExfiltration, list("envia manda reenvia sube publica schick sende ubermittle lade leite envoie envoyez transmet publie"), 4, 200,
			alt(`\b(?:envia|manda|reenvia|sube|publica)\b[^.!?\n]*?(?:conversacion|chat|historial|contrasena|clave|secretos?|credenciales|mensajes)`,
				`\b(?:schick|schicke|sende|senden\s+sie|ubermittle|lade|leite)\b[^.!?\n]*?(?:chatverlauf|unterhaltung|konversation|gesprach|passwort|passworter|schlussel|geheimnis|zugangsdaten|nachrichten)`,
				`\b(?:envoie|envoyez|transmets|transmettez|publie)\b[^.!?\n]*?(?:conversation|historique|mot de passe|cle|secrets?|identifiants|messages)`),
			`[^.!?\n]*?(?:https?://|@)`),

		// encoding_obfuscation, stated outright
		r(VectorEncoding, list("follow obey execute run perform carry act comply do"), 140, 60,
			`\b(?:decode|decipher|deobfuscate|unscramble|decrypt|reverse|read|translate|convert|interpret)\b[^.!?\n]*?(?:\band|\bthen|,)\s+(?:then\s+)?`,
			alt(`follow`, `obey`, `execute`, `run`, `perform`, `carry\s+out`, `act\s+on`, `comply\s+with`, `do\s+(?:it|that|what\s+it\s+says|as\s+it\s+says|them|the\s+instructions?)`), `\b`),
		r(VectorEncoding, list("decoded encoded base64 base-64 b64 hex rot13 rot-13 rot backwards reversed ciphered obfuscated"), 100, 20,
			`\b`, alt(`follow`, `obey`, `execute`, `run`, `do\s+what\s+it\s+says`, `do\s+what\s+they\s+say`, `carry\s+out`, `act\s+on`), `\b[^.!?\n]*?\b`,
			alt(`decoded`, `encoded`, `base64`, `base-64`, `b64`, `hex(?:adecimal)?`, `rot-?13`, `rot\s+13`, `backwards`, `reversed`, `ciphered`, `obfuscated`), `\b`),
		r(VectorEncoding, list("base64 base-64 b64 hex rot13 rot-13 encoded ciphered"), 4, 140,
			`\b`, alt(`base64`, `base-64`, `b64`, `hex`, `rot-?13`, `encoded`, `ciphered`), `\b[^.!?\n]*?\b`,
			alt(`follow\s+it`, `obey\s+it`, `do\s+what\s+it\s+says`, `execute\s+it`, `follow\s+the\s+instructions`, `run\s+it`, `do\s+it`), `\b`),
	}
})

// squashRules run on the letters-only views (and their rot13 and reversed
// forms); they hold only strong phrases, written without spaces.
var squashRules = sync.OnceValue(func() []rule {
	return []rule{
		r(VectorInstructionOverride, list("ignor disregard forget overrid bypass discard"), 2, 120,
			`(?:ignore|disregard|forget|override|bypass|discard)(?:all|any|every|of|the|your|my|these|those)*(?:previous|prior|above|earlier|preceding|original|initial|system)(?:instructions?|directions?|directives?|prompts?|rules|guidelines|commands?)`),
		r(VectorInstructionOverride, list("ignor disregard forget"), 2, 80,
			`(?:ignore|disregard|forget)(?:all|your)+(?:the)?(?:instructions|rules|guidelines|systemprompt)`),
		r(VectorPersonaHijacking, list("youarenow doanything restrict filter limit rules ethic censor guideline jailbreak developermode unrestricted uncensored unfiltered"), 40, 40,
			alt(`youarenow(?:dan|stan|dude|aim|jailbroken|unrestricted|unfiltered|uncensored|evil)`, `doanythingnow`,
				`(?:an?(?:ai|assistant|model|chatbot)(?:with|without)|youhave)(?:any)?no(?:restrictions|filters|limits|rules|ethics|censorship|guidelines)`,
				`jailbreakmode`, `developermodeenabled`, `(?:unrestricted|uncensored|unfiltered)(?:ai|model|assistant|mode)`)),
		r(VectorPromptExtraction, list("systemprompt systemmessage instructions preprompt"), 60, 30,
			alt(`(?:reveal|print|show|repeat|output|display|dump|tell|give|leak|spellout|writeout)(?:me)?(?:your|the)(?:full|entire|whole|hidden|secret|initial|original|exact)*(?:systemprompt|systemmessage|initialinstructions|hiddeninstructions|systeminstructions|preprompt)`, `yoursystemprompt`)),
	}
})

// window is a range of a view that a rule runs on.
type window struct{ s, e int }

// maxChecked is how many anchor windows of one rule are checked one by one
// for the rule's required literals; past it the windows are merged
// unchecked (the text is then made of anchors, and the regexp runs on all
// of it, which stays linear).
const maxChecked = 2048

// find calls fn with the view-byte range of each match of the rule in text,
// until fn returns false. The bytes the regexp is run on are taken from
// *budget; when they are more than is left, find runs nothing and returns
// false. A nil budget is unlimited.
func (ru *rule) find(v *view, budget *int, fn func(s, e int) bool) bool {
	text := v.text
	if ru.anchored != nil {
		return ru.findAnchored(v, budget, fn)
	}
	var wins []window
	checked := 0
	for _, a := range ru.anchors {
		for i := 0; i < len(text); {
			j := strings.Index(text[i:], a)
			if j < 0 {
				break
			}
			p := i + j
			i = p + len(a)
			s := max(0, p-ru.back)
			// Start and end a window at word boundaries so that \b holds.
			for k := 0; s > 0 && k < 32 && isWordByte(text[s-1]); k++ {
				s--
			}
			e := min(len(text), p+ru.fwd)
			for k := 0; e < len(text) && k < 32 && isWordByte(text[e]); k++ {
				e++
			}
			if n := len(wins); n > 0 && wins[n-1].e >= e && wins[n-1].s <= s {
				continue
			}
			if checked < maxChecked {
				checked++
				if !ru.hasRequired(text[s:e]) {
					continue
				}
			}
			wins = append(wins, window{s, e})
		}
	}
	if len(wins) == 0 {
		return true
	}
	sort.Slice(wins, func(a, b int) bool { return wins[a].s < wins[b].s })
	return ru.runWindows(text, mergeWindows(wins), budget, fn)
}

// mergeWindows merges the overlapping windows of wins, sorted by start, in
// place, and returns the merged ones.
func mergeWindows(wins []window) []window {
	merged := wins[:1]
	for _, w := range wins[1:] {
		if last := &merged[len(merged)-1]; w.s <= last.e {
			last.e = max(last.e, w.e)
			continue
		}
		merged = append(merged, w)
	}
	return merged
}

// runWindows runs the unanchored expression on each window, charging the
// windows to budget first.
func (ru *rule) runWindows(text string, merged []window, budget *int, fn func(s, e int) bool) bool {
	if budget != nil {
		cost := 0
		for _, w := range merged {
			cost += (w.e - w.s) * ru.weight
		}
		if cost > *budget {
			*budget = 0
			return false
		}
		*budget -= cost
	}
	for _, w := range merged {
		for pos := w.s; pos < w.e; {
			m := ru.re.FindStringIndex(text[pos:w.e])
			if m == nil {
				break
			}
			s, e := pos+m[0], pos+m[1]
			pos = e
			if e == s {
				pos++
			}
			// Gaps in the expressions are unbounded (a counted gap costs
			// the regexp engine a state per count); the bound is here.
			if e-s > ru.back+ru.fwd {
				continue
			}
			if !fn(s, e) {
				return true
			}
		}
	}
	return true
}

// findAnchored is find for a rule with known starts.
func (ru *rule) findAnchored(v *view, budget *int, fn func(s, e int) bool) bool {
	text := v.text
	var at []int
	for _, st := range ru.starts {
		if ru.wordStart && len(st) >= 2 && wordByte(st[0]) >= 0 && wordByte(st[1]) >= 0 {
			// A word start: look it up in the view's word index.
			v.wordsAt(st[0], st[1], func(p int) {
				if strings.HasPrefix(text[p:], st) {
					at = append(at, p)
				}
			})
			continue
		}
		for i := 0; i < len(text); {
			j := strings.Index(text[i:], st)
			if j < 0 {
				break
			}
			p := i + j
			i = p + 1
			if ru.wordStart && p > 0 && isWordByte(text[p-1]) {
				continue
			}
			at = append(at, p)
		}
	}
	if len(at) == 0 {
		return true
	}
	sort.Ints(at)
	// The slices to try, each from a start to at most the rule's reach.
	var wins []window
	for k, p := range at {
		if k > 0 && at[k-1] == p {
			continue
		}
		e := min(len(text), p+ru.back+ru.fwd)
		switch ru.cut {
		case "line":
			if i := strings.IndexByte(text[p:e], '\n'); i >= 0 {
				e = p + i
			}
		case "sentence":
			e = p + sentenceEnd(text[p:e])
		}
		for k := 0; e < len(text) && k < 32 && isWordByte(text[e]); k++ {
			e++
		}
		// Where the expression has gaps a failing attempt may run to the
		// end of the slice; a quick look for its required words first.
		if ru.cut != "" && !ru.hasRequired(text[p:e]) {
			continue
		}
		wins = append(wins, window{p, e})
	}
	if len(wins) == 0 {
		return true
	}
	// A failing attempt of a short expression stops within a few words;
	// one of a long expression (with gaps or broad loops) may run to the
	// end of its slice. When such slices overlap a lot (junk made of the
	// starts), one unanchored pass over their union costs less.
	sum, union, end := 0, 0, 0
	for _, w := range wins {
		sum += w.e - w.s
		union += max(0, w.e-max(w.s, end))
		end = max(end, w.e)
	}
	if ru.long && sum > 4*union+4096 {
		return ru.runWindows(text, mergeWindows(slices.Clone(wins)), budget, fn)
	}
	lastEnd := -1
	for _, w := range wins {
		p, e := w.s, w.e
		if p < lastEnd {
			continue
		}
		if budget != nil {
			// Most attempts fail within a few bytes; the overlap guard
			// above bounds the long ones.
			cost := min(e-p, 64) * ru.weight
			if cost > *budget {
				*budget = 0
				return false
			}
			*budget -= cost
		}
		m := ru.anchored.FindStringIndex(text[p:e])
		if m == nil {
			continue
		}
		lastEnd = p + m[1]
		if !fn(p, p+m[1]) {
			return true
		}
	}
	return true
}

// sentenceEnd returns where the sentence that s starts in ends: at a
// newline, or a full stop, question or exclamation mark followed by space.
func sentenceEnd(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			return i
		case '.', '!', '?':
			if i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '\n') {
				return i + 1
			}
		}
	}
	return len(s)
}

// hasRequired reports whether w holds, for each of the rule's required
// literal groups, at least one of the group's literals.
func (ru *rule) hasRequired(w string) bool {
	for _, g := range ru.required {
		ok := false
		for _, lit := range g {
			if strings.Contains(w, lit) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// requiredLiterals derives from an expression the groups of literals that
// every match contains: the result is an AND of groups, each an OR of
// literals. Groups with a literal shorter than minLiteral are dropped (they
// would filter nothing), so the result is a necessary condition only.
func requiredLiterals(expr string) [][]string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	var out [][]string
	for _, g := range reqGroups(re.Simplify()) {
		keep := len(g) > 0
		for _, l := range g {
			if len(l) < minLiteral && !strings.ContainsAny(l, "@:/<>[]{}#|`=") {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, simplifyGroup(g))
		}
	}
	// The smallest groups first: they are the cheapest to check.
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out
}

// simplifyGroup drops duplicates and literals that contain another literal
// of the group (finding "prompt" is enough where "system prompt" would do).
func simplifyGroup(g []string) []string {
	sort.Slice(g, func(i, j int) bool { return len(g[i]) < len(g[j]) })
	var out []string
	for _, l := range g {
		covered := false
		for _, k := range out {
			if strings.Contains(l, k) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, l)
		}
	}
	return out
}

// minLiteral is the shortest literal worth looking for, unless it holds
// punctuation rarer than letters ("@", "://").
const minLiteral = 3

// reqGroups returns required literal groups of re (see requiredLiterals).
func reqGroups(re *syntax.Regexp) [][]string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return [][]string{{string(re.Rune)}}
	case syntax.OpCapture, syntax.OpPlus:
		return reqGroups(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return reqGroups(re.Sub[0])
		}
		return nil
	case syntax.OpConcat:
		// Runs of children with finite string sets are joined into one
		// group of whole strings ("re" + (verse|ad) gives reverse, read).
		var out [][]string
		var run []string
		flush := func() {
			if len(run) > 0 {
				out = append(out, run)
			}
			run = nil
		}
		for _, sub := range re.Sub {
			if set, ok := stringSet(sub); ok {
				if run == nil {
					run = set
				} else if joined, ok := cross(run, set); ok {
					run = joined
				} else {
					flush()
					run = set
				}
				continue
			}
			flush()
			out = append(out, reqGroups(sub)...)
		}
		flush()
		return out
	case syntax.OpAlternate:
		if set, ok := stringSet(re); ok {
			return [][]string{set}
		}
		// Each branch must give a group; the alternation requires one
		// literal out of the union of each branch's best group.
		var union []string
		for _, sub := range re.Sub {
			best := bestGroup(reqGroups(sub))
			if best == nil {
				return nil
			}
			union = append(union, best...)
		}
		return [][]string{union}
	}
	return nil
}

// stringSet returns the finite set of strings re matches, when it is small
// (at most maxSet strings).
func stringSet(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		return []string{string(re.Rune)}, true
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpCapture:
		return stringSet(re.Sub[0])
	case syntax.OpQuest:
		set, ok := stringSet(re.Sub[0])
		if !ok {
			return nil, false
		}
		return append([]string{""}, set...), len(set) < maxSet
	case syntax.OpCharClass:
		var set []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if len(set) >= 4 {
					return nil, false
				}
				set = append(set, string(r))
			}
		}
		return set, true
	case syntax.OpAlternate:
		var set []string
		for _, sub := range re.Sub {
			s, ok := stringSet(sub)
			if !ok {
				return nil, false
			}
			set = append(set, s...)
			if len(set) > maxSet {
				return nil, false
			}
		}
		return set, true
	case syntax.OpConcat:
		set := []string{""}
		for _, sub := range re.Sub {
			s, ok := stringSet(sub)
			if !ok {
				return nil, false
			}
			if set, ok = cross(set, s); !ok {
				return nil, false
			}
		}
		return set, true
	}
	return nil, false
}

const maxSet = 128

// cross returns every a+b, when there are at most maxSet.
func cross(as, bs []string) ([]string, bool) {
	if len(as)*len(bs) > maxSet {
		return nil, false
	}
	out := make([]string, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			out = append(out, a+b)
		}
	}
	return out, true
}

// bestGroup picks the group whose shortest literal is longest.
func bestGroup(gs [][]string) []string {
	var best []string
	bestMin := -1
	for _, g := range gs {
		m := 1 << 30
		for _, l := range g {
			m = min(m, len(l))
		}
		if m > bestMin {
			best, bestMin = g, m
		}
	}
	return best
}

func isWordByte(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (c >= 'A' && c <= 'Z')
}
