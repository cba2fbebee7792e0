package localapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/agents"
	"github.com/mcpv2/mcpv2/protocol"
)

// AgentsResponse is GET /v1/agents, POST /v1/agents and DELETE
// /v1/agents?url=: the external A2A agents (protocol.ExternalAgent), by
// URL, the registered ones first, then those the REST face's discover
// route cached (Discovered); errors in full, for the operator. For POST,
// one entry per URL asked, in order (LastError says why one was not
// added).
type AgentsResponse struct {
	Agents []protocol.ExternalAgent `json:"agents"`
}

// AddAgentsRequest is the body of POST /v1/agents: the agents' base URLs,
// and whether this node bridges them into the mesh.
type AddAgentsRequest struct {
	URLs   []string `json:"urls"`
	Bridge bool     `json:"bridge,omitempty"`
}

// TaskResponse is GET /v1/find/task?q=TASK&limit=N: the agents ranked for a
// free-text task (node.FindAgentsForTask), at most limit (default
// DefaultTaskLimit, at most MaxTaskLimit).
type TaskResponse struct {
	Task    string               `json:"task"`
	Matches []protocol.TaskMatch `json:"matches"`
}

// The bounds of GET /v1/find/task's limit.
const (
	DefaultTaskLimit = 20
	MaxTaskLimit     = 200
)

// agentsTimeout bounds the card fetches of one POST /v1/agents, and a
// find for a task.
const agentsTimeout = 60 * time.Second

func (a *API) getAgents(w http.ResponseWriter, r *http.Request) {
	list, err := a.n.Agents(r.Context(), node.Operator())
	if err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, AgentsResponse{Agents: list})
}

func (a *API) postAgents(w http.ResponseWriter, r *http.Request) {
	req, err := decodeBody[AddAgentsRequest](http.MaxBytesReader(w, r.Body, maxBody), `{"urls": [URL, …], "bridge": BOOL}`)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	if len(req.URLs) == 0 || len(req.URLs) > agents.MaxDiscover {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "urls: want 1 to 32 agent URLs")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), agentsTimeout)
	defer cancel()
	list, err := a.n.AddAgents(ctx, node.Operator(), req.URLs, req.Bridge)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, CodeUnreachable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, AgentsResponse{Agents: list})
}

func (a *API) deleteAgent(w http.ResponseWriter, r *http.Request) {
	u := r.URL.Query().Get("url")
	if u == "" {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "url: the agent's URL is required (DELETE /v1/agents?url=URL)")
		return
	}
	err := a.n.RemoveAgent(r.Context(), node.Operator(), u)
	switch {
	case errors.Is(err, agents.ErrNoAgent):
		writeError(w, http.StatusNotFound, CodeNoAgent, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	a.getAgents(w, r)
}

func (a *API) getFindTask(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	if q == "" || len(q) > 1024 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "q: the task, 1 to 1024 bytes")
		return
	}
	limit := DefaultTaskLimit
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxTaskLimit {
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("limit: %q is not a number from 1 to %d", clipQ(l), MaxTaskLimit))
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), agentsTimeout)
	defer cancel()
	res, err := a.n.FindAgentsForTask(ctx, q, limit)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, TaskResponse{Task: q, Matches: res})
}

// Agents is GET /v1/agents.
func (c *Client) Agents(ctx context.Context) (*AgentsResponse, error) {
	var out AgentsResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/agents", nil, &out)
}

// AddAgents is POST /v1/agents.
func (c *Client) AddAgents(ctx context.Context, req AddAgentsRequest) (*AgentsResponse, error) {
	var out AgentsResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/agents", req, &out)
}

// RemoveAgent is DELETE /v1/agents?url=: the agents left. An agent that is
// not registered comes back wrapping agents.ErrNoAgent.
func (c *Client) RemoveAgent(ctx context.Context, agentURL string) (*AgentsResponse, error) {
	var out AgentsResponse
	return &out, c.do(ctx, http.MethodDelete, "/v1/agents?url="+url.QueryEscape(agentURL), nil, &out)
}

// FindTask is GET /v1/find/task?q=TASK&limit=N (limit ≤ 0: the default).
func (c *Client) FindTask(ctx context.Context, task string, limit int) (*TaskResponse, error) {
	var out TaskResponse
	q := "/v1/find/task?q=" + url.QueryEscape(task)
	if limit > 0 {
		q += "&limit=" + strconv.Itoa(min(limit, MaxTaskLimit))
	}
	return &out, c.do(ctx, http.MethodGet, q, nil, &out)
}

// clipQ cuts a query value for an error.
func clipQ(s string) string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}
