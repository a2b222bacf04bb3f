// Package clustertest starts embedded clusters for tests and checks what they hold, as
// net/http/httptest does for HTTP servers: Start (a cluster in the test's temp dir, closed at
// cleanup), NewClient (a kgo client of it), Produce and ConsumeAll (acks=all records and
// reading them back to the HW), CheckNoLoss and CheckReplicasIdentical (the durability and
// replica-identity checks), FollowedTopic and WatchPartition (a topic with a follower to
// fault, and waiting on its partition state).
//
// Every function fails the test it is given (t.Fatal) rather than returning an error, and is
// called from the test's goroutine.
package clustertest
