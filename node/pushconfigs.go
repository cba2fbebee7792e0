package node

import "encoding/json"

// SavePushConfig, PushConfigs and DeletePushConfig keep the
// push-notification configs of the A2A face's tasks in the node's store,
// deleted with their task (store.SavePushConfig and the others); the face
// checks that the caller owns the task.
func (n *Node) SavePushConfig(taskID, id string, config json.RawMessage, max int) error {
	return n.store.SavePushConfig(taskID, id, config, max)
}

// PushConfigs returns a task's push-notification configs; see
// SavePushConfig.
func (n *Node) PushConfigs(taskID string) ([]json.RawMessage, error) {
	return n.store.PushConfigs(taskID)
}

// DeletePushConfig deletes a task's push-notification config id ("" all
// of them) and says whether there was one; see SavePushConfig.
func (n *Node) DeletePushConfig(taskID, id string) (bool, error) {
	return n.store.DeletePushConfig(taskID, id)
}
