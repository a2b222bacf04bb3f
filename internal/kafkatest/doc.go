// Package kafkatest is what wire-level tests of a Kafka listener share: Client, a raw
// client of the Kafka framing (request header v1/v2, one request at a time) that reads
// responses with kmsg; request builders (Batch, NewProduce, APIVersionsFrame); Answered (is
// a new connection answered or closed); LogSink (a server's log lines, waited on); and
// WaitFor (poll a condition with a deadline).
//
// Every function fails the test it is given rather than returning an error.
package kafkatest
