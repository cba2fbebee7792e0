package protocol

import (
	"encoding/json"
	"errors"
	"time"
)

// StoredTask is a task of a face (A2A) as the node keeps it: the face's own
// JSON of the task, and what the store indexes it by. The node does not
// read Task; the face owns its shape.
type StoredTask struct {
	// ID is the task's identifier, unique on the node.
	ID string `json:"id"`
	// ContextID groups the tasks of one conversation.
	ContextID string `json:"context_id"`
	// Owner is who may see the task: the Owner of the caller that created
	// it (Caller.Owner), prefixed by the face that keeps it.
	Owner string `json:"owner"`
	// Trusted says the owner is the node's own (a secret holder): its
	// tasks count against the store's total cap of task bytes, not against
	// one owner's share of it.
	Trusted bool `json:"trusted,omitempty"`
	// State is the face's name of the task's state.
	State string `json:"state"`
	// Final says the state is terminal: the task never changes again.
	Final bool `json:"final"`
	// Created and Updated are when the task was made and last saved.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Seq is the sequence number of the task's last event.
	Seq uint64 `json:"seq"`
	// Task is the face's JSON of the task.
	Task json.RawMessage `json:"task"`
}

// TaskEvent is one event of a task, numbered from 1 in the order the
// events happened, so that a subscriber that lost its stream can ask for
// those after the last it saw.
type TaskEvent struct {
	Seq   uint64          `json:"seq"`
	Event json.RawMessage `json:"event"`
}

// TaskQuery selects tasks for a listing: an owner's, newest update first.
type TaskQuery struct {
	// ContextID, State: only tasks with that context or state.
	ContextID, State string
	// Unfinished: only tasks not in a terminal state.
	Unfinished bool
	// UpdatedAfter: only tasks updated after it.
	UpdatedAfter time.Time
	// Limit caps the tasks returned (0: no cap).
	Limit int
	// Before continues a listing: only tasks listed after the one with
	// this ID (a page token).
	Before string
}

// ErrTaskNotFound is wrapped when no task has the ID asked for (the node's
// store and the faces share it).
var ErrTaskNotFound = errors.New("task not found")

// ErrTaskFinal is wrapped when a task in a terminal state is saved again.
var ErrTaskFinal = errors.New("task is in a terminal state")
