// Package adminapi is the admin HTTP API of an embedded cluster (`isrbench serve --admin`,
// served with fasthttp): the brokers' states and the actions on them (stop, kill, crash,
// pause, resume, start: cluster.Act), the replica links' faults (slow, down, heal:
// ParseLinkFault, cluster.SetBrokerLinks), and the brokers' metrics in the Prometheus text
// format under the names of Kafka's JMX MBeans. server.go lists the endpoints.
//
// Every request is checked first (guard.go): its Host must be an address of the listener
// (against DNS rebinding), a POST must come from no foreign Origin and carry Header
// ("X-Isrbench: 1") or a JSON Content-Type, and with a token configured (ReadToken, for
// `--admin-token-file`) every request needs it as a bearer token.
//
// # Concurrency
//
// A Server's Serve, Close and handlers may run concurrently.
package adminapi
