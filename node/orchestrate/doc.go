// Package orchestrate turns one request ("research X, compute Y, summarize")
// into a plan of subtasks, routes each subtask to the best agent the mesh
// knows, runs the subtasks concurrently as a DAG, and aggregates one answer
// that says what happened to every part.
//
// The four stages:
//
//   - Plan: a [Planner] splits the request into [Subtask]s. [Heuristic]
//     (the default, [HeuristicPlanner]) maps clauses to skills by keywords;
//     [NewLLMPlanner] asks a language model for a JSON plan and falls back to
//     the heuristic when the answer is not a valid plan. A caller may also
//     give a plan ([ParsePlan], [Orchestrator.RunPlan]).
//   - Assign: for each subtask the [Finder] is asked for agents offering the
//     subtask's skill (and each of its tags); agents whose card does not
//     offer the skill itself are dropped, and the rest are ranked over the
//     subtask's text with the discovery weights (skill name 2.0, capability
//     name 2.0, skill tag 1.5, description word 0.5, reachable 1.0), ties
//     broken by measured latency ([WithLatency]) and then by PeerID.
//   - Dispatch: a subtask starts when every subtask it depends on is done;
//     independent subtasks run concurrently, at most [WithConcurrency] at a
//     time. Each attempt calls one candidate through the [Caller] under the
//     per-attempt timeout ([WithSubtaskTimeout]); a failed attempt moves on to
//     the next candidate, up to [WithMaxAttempts], except when the agent
//     refused the arguments (protocol.CodeInvalidParams), which another agent
//     would refuse as well. A failed subtask makes its dependents "skipped".
//   - Aggregate: the [Summarizer] (when set) writes the answer from the
//     parts; otherwise it is a numbered list of the parts and their results.
//
// # Arguments and templates
//
// A subtask's Arguments is a JSON object. Every string value in it (at any
// depth; keys are never templates) that contains "{{" is a Go text/template,
// executed just before the subtask runs over the results of the subtasks it
// depends on (DependsOn), and only those. The template's data (dot) is a map
// from each dependency's id to a map with these keys:
//
//	result  the dependency's JSON result, decoded (objects are
//	        map[string]any, numbers json.Number, so {{.a.result.sum}} prints
//	        a number as the agent wrote it)
//	text    the result as text: the result itself when it is a JSON string;
//	        else the first of its fields "response", "answer", "result",
//	        "text", "summary", "output", "content", "message" that is a
//	        string, number or boolean; else the compact JSON of the result
//	raw     the compact JSON of the result, as a string
//	skill   the skill that produced it
//	agent   the PeerID of the agent that produced it
//
// For example {"query": "Summarise: {{.search.text}}"} or, for an id that is
// not a template identifier (one holding '-'), {{index . "web-1" "text"}}.
// One function is added to the template builtins: json, which renders its
// argument as compact JSON ({{json .a.result}}). A string value that is
// exactly one action calling json ("{{json .a.result}}") is replaced by that
// JSON value itself, not by a string holding it, so that a number or an
// object passes through with its type; any other template yields a string.
// A reference to a missing key is an error. Templates may not loop
// ({{range}}), define or call templates, or refer to a subtask not in
// DependsOn (Validate checks); printf takes widths and precisions of at
// most four digits. What a subtask's templates write, and what their text
// functions (json, print, printf, println, html, js, urlquery) return, may
// not exceed 1 MiB in all, so a template's work is bounded by its size and
// its data's. To write "{{" literally, write {{"{{"}}.
//
// # Progress and cancellation
//
// The progress callback given to [Orchestrator.Run] sees every state change
// of every subtask ([Event]), one call at a time, in increasing Seq order,
// and never after Run has returned. Cancelling Run's context stops the
// running attempts (the Finder and the Caller must honour their contexts),
// fails the subtasks that had not finished and returns the partial
// [Result] together with the context's error.
package orchestrate
