package interop

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// python is the interpreter that has the Debian client packages (pyenv's python3 on PATH
// does not): /usr/bin/python3 unless ISRBENCH_PYTHON names another.
func python() string {
	if p := os.Getenv("ISRBENCH_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

func needPython(t *testing.T, client, module string) {
	t.Helper()
	err := exec.Command(python(), "-c", "import "+module).Run()
	if err != nil {
		err = fmt.Errorf("%s cannot import %s (Debian package python3-%s): %v", python(), module, map[string]string{"confluent_kafka": "confluent-kafka", "kafka": "kafka"}[module], err)
	}
	need(t, client, err)
}

func TestConfluentKafkaPython(t *testing.T) {
	needPython(t, "confluent-kafka-python", "confluent_kafka")
	c := startCluster(t)
	cl := scriptClient("confluent-kafka-python", "python", python(), "confluent_client.py")
	if exec.Command(python(), "-c", "from confluent_kafka.admin import AdminClient; AdminClient.delete_records").Run() == nil {
		cl.deleteRecords = scriptDeleteRecords("python", python(), "confluent_admin.py") // 2.4+
	}
	runSuite(t, c, cl)
}

func TestKafkaPython(t *testing.T) {
	needPython(t, "kafka-python", "kafka")
	c := startCluster(t)
	runSuite(t, c, scriptClient("kafka-python", "python", python(), "kafka_python_client.py"))
}
