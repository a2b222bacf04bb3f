package interop

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func TestKafkajs(t *testing.T) {
	var err error
	if _, lerr := exec.LookPath("node"); lerr != nil {
		err = fmt.Errorf("node: %v", lerr)
	} else if _, serr := os.Stat("js/node_modules/kafkajs/package.json"); serr != nil {
		err = errors.New("js/node_modules/kafkajs is missing: run npm ci in interop/js")
	}
	need(t, "kafkajs", err)
	c := startCluster(t)
	cl := scriptClient("kafkajs", "js", "node", "client.js")
	cl.deleteRecords = scriptDeleteRecords("js", "node", "admin.js") // admin.deleteTopicRecords
	runSuite(t, c, cl)
}
