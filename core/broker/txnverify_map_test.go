package broker

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestVerifyErrForProduce: the coordinator's verification errors become the produce errors
// Kafka's ReplicaManager answers, and the message names the partition and the id.
func TestTxnVerifyErrForProduce(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want *kerr.Error
	}{
		{kerr.InvalidTxnState, kerr.InvalidTxnState},
		{fmt.Errorf("busy: %w", kerr.ConcurrentTransactions), kerr.NotEnoughReplicas},
		{kerr.NotCoordinator, kerr.NotEnoughReplicas},
		{kerr.CoordinatorNotAvailable, kerr.NotEnoughReplicas},
		{kerr.CoordinatorLoadInProgress, kerr.NotEnoughReplicas},
		{kerr.ProducerFenced, kerr.InvalidProducerEpoch},
		{kerr.InvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	} {
		got := TxnVerifyErrForProduce("tx", "t", 3, tc.in)
		var ke *kerr.Error
		if !errors.As(got, &ke) || ke.Code != tc.want.Code {
			t.Errorf("%v: produce answers %v, want %v", tc.in, ke, tc.want)
		}
		if msg := got.Error(); !strings.Contains(msg, "t-3") || !strings.Contains(msg, `"tx"`) || !errors.Is(got, tc.want) {
			t.Errorf("%v: message %q does not name the partition and the transactional id, or does not wrap the error", tc.in, msg)
		}
	}
	if err := TxnVerifyErrForProduce("tx", "t", 3, nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}
