package main

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// newClient returns a kgo client for --bootstrap host:port[,host:port], for the requests
// kadm has no helper for (CreateTopics with a manual assignment); a bad address is a usage
// error. It is configured as newAdmin's.
func newClient(cmd, bootstrap string) (*kgo.Client, error) {
	addrs, err := checkBootstrap(cmd, bootstrap)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, usagef("%s: --bootstrap %q: %v", cmd, bootstrap, err)
	}
	return cl, nil
}
