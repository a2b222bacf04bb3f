package clientprops

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Opts returns the kgo options of c's security: kgo.DialTLSConfig under SSL and SASL_SSL,
// kgo.SASL under SASL_PLAINTEXT and SASL_SSL (franz-go's mechanisms). It reads the
// certificate files now, so that a missing file is an error before any connection. A nil or
// PLAINTEXT Config gives no options.
func (c *Config) Opts() ([]kgo.Opt, error) {
	if c == nil {
		return nil, nil
	}
	var opts []kgo.Opt
	tc, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.Protocol.SASL() {
		m, err := c.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// SASLMechanism returns franz-go's client mechanism of c's SASL settings (nil without SASL).
func (c *Config) SASLMechanism() (sasl.Mechanism, error) {
	if c == nil || !c.Protocol.SASL() {
		return nil, nil
	}
	return c.mechanism()
}

func (c *Config) mechanism() (sasl.Mechanism, error) {
	switch c.Mechanism {
	case MechPlain:
		return plain.Auth{User: c.User, Pass: c.password.reveal()}.AsMechanism(), nil
	case MechScramSHA256:
		return scram.Auth{User: c.User, Pass: c.password.reveal(), IsToken: c.scramToken}.AsSha256Mechanism(), nil
	case MechScramSHA512:
		return scram.Auth{User: c.User, Pass: c.password.reveal(), IsToken: c.scramToken}.AsSha512Mechanism(), nil
	case MechOAuthBearer:
		if _, err := readToken(c.tokenFile); err != nil {
			return nil, err
		}
		file, ext := c.tokenFile, c.extensions
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := readToken(file)
			return oauth.Auth{Token: tok, Extensions: ext}, err
		}), nil
	case MechAWSMSKIAM:
		return nil, ErrAWSNotBuilt
	}
	return nil, fmt.Errorf("BUG: sasl.mechanism %q passed New", c.Mechanism)
}

// readToken reads an OAUTHBEARER token file (one token; surrounding blanks dropped). Errors
// name the file, never its contents.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("OAUTHBEARER token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("OAUTHBEARER token file %s: want one token (a JWT), got %s", path, map[bool]string{true: "nothing", false: "several words"}[tok == ""])
	}
	return tok, nil
}
