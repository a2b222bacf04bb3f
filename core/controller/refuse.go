package controller

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// refuseLocked notes that a change was refused because the metadata log cannot be written,
// says so (loudly at the first refusal, then at most every 10 s) and returns the error for
// the caller.
func (c *Controller) refuseLocked(cause error) error {
	now := c.now()
	c.mu.storeFailures++
	c.mu.refused++
	if c.mu.storeErr == nil {
		c.mu.storeErr = cause
		c.mu.refusedLogged = now
		c.logf("controller: METADATA LOG %s CANNOT BE WRITTEN: %v. Every metadata change (elections, ISR changes, fencing, topics, configs) "+
			"is refused until it can be written again; brokers keep their last state, so acks=all produces wait rather than lose data", c.cfg.Dir, cause)
	} else if now-c.mu.refusedLogged >= 10*int64(time.Second) {
		c.mu.refusedLogged = now
		c.logf("controller: metadata log %s still cannot be written (%d changes refused): %v", c.cfg.Dir, c.mu.refused, cause)
	}
	return &refusedError{dir: c.cfg.Dir, cause: cause}
}

// refusedError is a change refused because the metadata log cannot be written. It matches
// ErrMetadataLog, its cause and kerr.KafkaStorageError (its code on the wire) with
// errors.Is; its text names the directory and the cause once.
type refusedError struct {
	dir   string
	cause error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("controller: the metadata log %s cannot be written (%v): the change was not made", e.dir, e.cause)
}

func (e *refusedError) Unwrap() []error {
	return []error{ErrMetadataLog, e.cause, kerr.KafkaStorageError}
}
