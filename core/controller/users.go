package controller

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// SCRAM users, as KRaft keeps them: UserScramCredentialRecords in the metadata log (record
// type "scram-user"), changed by AlterUserScramCredentials and read by the brokers' SASL
// SCRAM (and PLAIN) authentication. A credential holds what RFC 5802 lets a server keep:
// the salt, the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key"); never the password or the salted password.

// The SCRAM mechanisms, by Kafka's names.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// The bounds Kafka puts on a credential's iteration count (ScramMechanism).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// ScramHash returns the hash of a SCRAM mechanism, or nil for another name.
func ScramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// ScramCredential is one user's credential for one mechanism. A value; its slices are not
// shared with the controller.
type ScramCredential struct {
	Mechanism  string
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// NewScramCredential derives a credential from a salted password (Hi(password, salt, i) of
// RFC 5802, what AlterUserScramCredentials carries).
func NewScramCredential(mechanism string, salt, saltedPassword []byte, iterations int32) (ScramCredential, error) {
	h := ScramHash(mechanism)
	if h == nil {
		return ScramCredential{}, fmt.Errorf("SCRAM mechanism %q; allowed %s, %s: %w", mechanism, ScramSHA256, ScramSHA512, kerr.UnsupportedSaslMechanism)
	}
	clientKey := hmacOf(h, saltedPassword, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return ScramCredential{Mechanism: mechanism, Salt: slices.Clone(salt), StoredKey: sum.Sum(nil),
		ServerKey: hmacOf(h, saltedPassword, "Server Key"), Iterations: iterations}, nil
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func (c ScramCredential) clone() ScramCredential {
	c.Salt, c.StoredKey, c.ServerKey = slices.Clone(c.Salt), slices.Clone(c.StoredKey), slices.Clone(c.ServerKey)
	return c
}

// scramUserRecord sets (StoredKey given) or deletes (StoredKey empty) one user's credential
// for one mechanism.
type scramUserRecord struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt,omitempty"`
	StoredKey  []byte `json:"stored_key,omitempty"`
	ServerKey  []byte `json:"server_key,omitempty"`
	Iterations int32  `json:"iterations,omitempty"`
}

// scramUsers is the image's users: user -> mechanism -> credential. Entries never empty.
type scramUsers map[string]map[string]ScramCredential

func (u scramUsers) clone() scramUsers {
	out := make(scramUsers, len(u))
	for name, m := range u {
		cm := make(map[string]ScramCredential, len(m))
		for mech, c := range m {
			cm[mech] = c.clone()
		}
		out[name] = cm
	}
	return out
}

// userRecords are the image's users as records (for a snapshot).
func (m *image) userRecords() []record {
	var out []record
	for _, name := range slices.Sorted(maps.Keys(m.users)) {
		for _, mech := range slices.Sorted(maps.Keys(m.users[name])) {
			out = append(out, scramRecord(name, m.users[name][mech]))
		}
	}
	return out
}

func scramRecord(user string, c ScramCredential) record {
	return record{Type: "scram-user", ScramUser: &scramUserRecord{User: user, Mechanism: c.Mechanism,
		Salt: slices.Clone(c.Salt), StoredKey: slices.Clone(c.StoredKey), ServerKey: slices.Clone(c.ServerKey), Iterations: c.Iterations}}
}

// applyUser replays a scram-user record.
func (m *image) applyUser(r record) error {
	u := r.ScramUser
	if u == nil || u.User == "" || ScramHash(u.Mechanism) == nil {
		return errors.New("bad SCRAM user")
	}
	if m.users == nil {
		m.users = scramUsers{}
	}
	if len(u.StoredKey) == 0 {
		delete(m.users[u.User], u.Mechanism)
		if len(m.users[u.User]) == 0 {
			delete(m.users, u.User)
		}
		return nil
	}
	if m.users[u.User] == nil {
		m.users[u.User] = map[string]ScramCredential{}
	}
	m.users[u.User][u.Mechanism] = ScramCredential{Mechanism: u.Mechanism, Salt: slices.Clone(u.Salt),
		StoredKey: slices.Clone(u.StoredKey), ServerKey: slices.Clone(u.ServerKey), Iterations: u.Iterations}
	return nil
}

// ScramCredentialOf returns user's credential for mechanism.
func (c *Controller) ScramCredentialOf(user, mechanism string) (ScramCredential, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cred, ok := c.mu.users[user][mechanism]
	return cred.clone(), ok
}

// ScramCredentialsOf returns every credential of user (any mechanism), by mechanism name.
func (c *Controller) ScramCredentialsOf(user string) []ScramCredential {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ScramCredential
	for _, mech := range slices.Sorted(maps.Keys(c.mu.users[user])) {
		out = append(out, c.mu.users[user][mech].clone())
	}
	return out
}

// DescribedUser is one user of DescribeUserScramCredentials: its mechanisms and iteration
// counts, or the error of that user.
type DescribedUser struct {
	User        string
	Credentials []ScramCredential // Mechanism and Iterations only
	Err         error
}

// DescribeScramUsers answers DescribeUserScramCredentials as Kafka does: users nil or
// empty describes every user; a user asked for twice is DUPLICATE_RESOURCE, one without
// credentials RESOURCE_NOT_FOUND.
func (c *Controller) DescribeScramUsers(users []string) []DescribedUser {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(users) == 0 {
		users = slices.Sorted(maps.Keys(c.mu.users))
	}
	count := map[string]int{}
	for _, u := range users {
		count[u]++
	}
	var out []DescribedUser
	seen := map[string]bool{}
	for _, u := range users {
		if seen[u] {
			continue
		}
		seen[u] = true
		d := DescribedUser{User: u}
		switch {
		case count[u] > 1:
			d.Err = fmt.Errorf("cannot describe SCRAM credentials for the same user twice in a single request: %w", kerr.DuplicateResource)
		case len(c.mu.users[u]) == 0:
			d.Err = fmt.Errorf("attempt to describe a user credential that does not exist: %w", kerr.ResourceNotFound)
		default:
			for _, mech := range slices.Sorted(maps.Keys(c.mu.users[u])) {
				d.Credentials = append(d.Credentials, ScramCredential{Mechanism: mech, Iterations: c.mu.users[u][mech].Iterations})
			}
		}
		out = append(out, d)
	}
	return out
}

// ScramDeletion removes user's credential for mechanism.
type ScramDeletion struct{ User, Mechanism string }

// ScramUpsertion sets user's credential for mechanism from a salt and a salted password.
type ScramUpsertion struct {
	User, Mechanism      string
	Iterations           int32
	Salt, SaltedPassword []byte
}

// AlterScramUsers applies AlterUserScramCredentials as Kafka does, all of a user's changes
// or none: a user with a change naming an unknown mechanism (UNSUPPORTED_SASL_MECHANISM),
// an empty name, too few or too many iterations or an empty salt or salted password
// (UNACCEPTABLE_CREDENTIAL), the same mechanism twice (DUPLICATE_RESOURCE) or the deletion
// of a credential it does not have (RESOURCE_NOT_FOUND) is refused with that error. It
// returns each user's error (nil: altered), by user in request order, and the error of a
// metadata log that could not be written (then nothing was altered).
func (c *Controller) AlterScramUsers(dels []ScramDeletion, ups []ScramUpsertion) (results map[string]error, order []string, err error) {
	c.lock()
	defer c.unlockErr(&err)
	results = map[string]error{}
	pairs := map[[2]string]int{}
	note := func(user, mech string) {
		if _, ok := results[user]; !ok {
			results[user] = nil
			order = append(order, user)
		}
		pairs[[2]string{user, mech}]++
	}
	for _, d := range dels {
		note(d.User, d.Mechanism)
	}
	for _, u := range ups {
		note(u.User, u.Mechanism)
	}
	fail := func(user string, e error) {
		if results[user] == nil {
			results[user] = e
		}
	}
	check := func(user, mech string) {
		switch {
		case user == "":
			fail(user, fmt.Errorf("username must not be empty: %w", kerr.UnacceptableCredential))
		case ScramHash(mech) == nil:
			fail(user, fmt.Errorf("unknown SCRAM mechanism %q: %w", mech, kerr.UnsupportedSaslMechanism))
		case pairs[[2]string{user, mech}] > 1:
			fail(user, fmt.Errorf("a user credential cannot be altered twice in the same request: %w", kerr.DuplicateResource))
		}
	}
	for _, d := range dels {
		check(d.User, d.Mechanism)
		if _, ok := c.mu.users[d.User][d.Mechanism]; !ok {
			fail(d.User, fmt.Errorf("attempt to delete a user credential that does not exist: %w", kerr.ResourceNotFound))
		}
	}
	creds := make([]ScramCredential, len(ups))
	for i, u := range ups {
		check(u.User, u.Mechanism)
		switch {
		case u.Iterations < MinScramIterations:
			fail(u.User, fmt.Errorf("too few iterations (%d < %d): %w", u.Iterations, MinScramIterations, kerr.UnacceptableCredential))
		case u.Iterations > MaxScramIterations:
			fail(u.User, fmt.Errorf("too many iterations (%d > %d): %w", u.Iterations, MaxScramIterations, kerr.UnacceptableCredential))
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			fail(u.User, fmt.Errorf("a SCRAM credential needs a salt and a salted password: %w", kerr.UnacceptableCredential))
		}
		if results[u.User] == nil {
			creds[i], _ = NewScramCredential(u.Mechanism, u.Salt, u.SaltedPassword, u.Iterations)
		}
	}
	if c.mu.users == nil {
		c.mu.users = scramUsers{}
	}
	for _, d := range dels {
		if results[d.User] == nil {
			rec := record{Type: "scram-user", ScramUser: &scramUserRecord{User: d.User, Mechanism: d.Mechanism}}
			c.mu.image.applyUser(rec)
			c.mu.batch = append(c.mu.batch, rec)
		}
	}
	for i, u := range ups {
		if results[u.User] == nil {
			rec := scramRecord(u.User, creds[i])
			c.mu.image.applyUser(rec)
			c.mu.batch = append(c.mu.batch, rec)
		}
	}
	return results, order, nil
}
