// Package clientprops reads Kafka client properties, the Java-style .properties file that
// Kafka's tools take with --command-config (and librdkafka's tools, kcat -F, with its own
// names for the same settings), and turns its security settings into franz-go options:
// security.protocol, sasl.mechanism, sasl.jaas.config, the librdkafka sasl.username and
// sasl.password, the PEM trust and key stores, and hostname verification.
//
// Lifecycle: Parse (or Load) gives the ordered properties; New checks them and gives a
// Config; Config.Opts reads the certificate files and builds the kgo options; Check opens one
// connection with them and turns a refusal into an error that names its cause
// (SASL_AUTHENTICATION_FAILED, an x509 reason, a TLS/plaintext mismatch).
//
// Secrets (passwords, tokens, private keys) never appear in an error, a String or a
// Redacted map: they are shown as [hidden], as Kafka shows a Password config.
//
// Concurrency: a Config is immutable after New and may be used from any goroutine; the
// options it builds may be given to any number of clients.
package clientprops
