package node

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// SavePushConfig, PushConfigs and DeletePushConfig keep the
// push-notification configs of the A2A face's tasks in the node's store,
// deleted with their task (store.SavePushConfig and the others); the face
// checks that the caller owns the task. A refusal the caller can act on
// is a *protocol.Error (errors.As): one config too many or too large is
// -32602 saying which; a full share of the task store is the store's
// quota error, its numbers in Data.
func (n *Node) SavePushConfig(taskID, id string, config json.RawMessage, max int) error {
	err := n.store.SavePushConfig(taskID, id, config, max)
	if !errors.Is(err, store.ErrTooLarge) {
		return err
	}
	msg := fmt.Sprintf("task %q has %d push-notification configs, the most a task may (delete one first)", taskID, max)
	if len(config) > store.MaxPushConfigBytes {
		msg = fmt.Sprintf("the config is %d bytes, more than %d", len(config), store.MaxPushConfigBytes)
	}
	return &protocol.Error{Code: protocol.CodeInvalidParams, Message: "invalid params: " + msg}
}

// PushConfigs returns a task's push-notification configs; see
// SavePushConfig.
func (n *Node) PushConfigs(taskID string) ([]json.RawMessage, error) {
	return n.store.PushConfigs(taskID)
}

// DeletePushConfig deletes a task's push-notification config id and says
// whether there was one; see SavePushConfig.
func (n *Node) DeletePushConfig(taskID, id string) (bool, error) {
	return n.store.DeletePushConfig(taskID, id)
}
