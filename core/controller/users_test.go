package controller

import (
	"crypto/pbkdf2"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/vfs"
)

func salted(t *testing.T, mech, password string, salt []byte, iter int) []byte {
	t.Helper()
	b, err := pbkdf2.Key(ScramHash(mech), password, salt, iter, ScramHash(mech)().Size())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func upsert(t *testing.T, user, mech, password string, iter int32) ScramUpsertion {
	salt := []byte("salt-of-" + user)
	return ScramUpsertion{User: user, Mechanism: mech, Iterations: iter, Salt: salt, SaltedPassword: salted(t, mech, password, salt, int(iter))}
}

func mustAlter(t *testing.T, c *Controller, dels []ScramDeletion, ups []ScramUpsertion) {
	t.Helper()
	res, _, err := c.AlterScramUsers(dels, ups)
	if err != nil {
		t.Fatal(err)
	}
	for u, e := range res {
		if e != nil {
			t.Fatalf("user %s: %v", u, e)
		}
	}
}

func TestScramUsers(t *testing.T) {
	c, _ := newTestController(t, 1, Config{})
	mustAlter(t, c, nil, []ScramUpsertion{upsert(t, "alice", ScramSHA256, "pw", 8192), upsert(t, "alice", ScramSHA512, "pw", 4096), upsert(t, "bob", ScramSHA512, "pw2", 4096)})
	cred, ok := c.ScramCredentialOf("alice", ScramSHA256)
	want, _ := NewScramCredential(ScramSHA256, []byte("salt-of-alice"), salted(t, ScramSHA256, "pw", []byte("salt-of-alice"), 8192), 8192)
	if !ok || !slices.Equal(cred.StoredKey, want.StoredKey) || !slices.Equal(cred.ServerKey, want.ServerKey) || cred.Iterations != 8192 {
		t.Fatalf("alice's credential %+v, %v", cred, ok)
	}
	d := c.DescribeScramUsers(nil)
	if len(d) != 2 || d[0].User != "alice" || len(d[0].Credentials) != 2 || d[0].Credentials[0].Iterations != 8192 || d[1].User != "bob" {
		t.Fatalf("describe all: %+v", d)
	}
	if d[0].Credentials[0].StoredKey != nil {
		t.Fatal("describe hands out keys")
	}
	mustAlter(t, c, []ScramDeletion{{"alice", ScramSHA256}}, nil)
	if _, ok := c.ScramCredentialOf("alice", ScramSHA256); ok {
		t.Fatal("deleted credential still there")
	}
	mustAlter(t, c, []ScramDeletion{{"alice", ScramSHA512}}, nil)
	d = c.DescribeScramUsers([]string{"alice", "bob", "bob"})
	if len(d) != 2 || !errors.Is(d[0].Err, kerr.ResourceNotFound) || !errors.Is(d[1].Err, kerr.DuplicateResource) {
		t.Fatalf("describe: %+v", d)
	}
}

// TestScramUsersRefused: each refusal of AlterUserScramCredentials, with Kafka's code, and
// a user's other changes in the request refused with it.
func TestScramUsersRefused(t *testing.T) {
	c, _ := newTestController(t, 1, Config{})
	mustAlter(t, c, nil, []ScramUpsertion{upsert(t, "carol", ScramSHA256, "pw", 4096)})
	for _, tc := range []struct {
		name string
		dels []ScramDeletion
		ups  []ScramUpsertion
		user string
		want error
	}{
		{"empty name", nil, []ScramUpsertion{upsert(t, "", ScramSHA256, "pw", 4096)}, "", kerr.UnacceptableCredential},
		{"mechanism", nil, []ScramUpsertion{upsert(t, "x", ScramSHA256, "pw", 4096), {User: "x", Mechanism: "SCRAM-SHA-1", Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")}}, "x", kerr.UnsupportedSaslMechanism},
		{"too few iterations", nil, []ScramUpsertion{{User: "x", Mechanism: ScramSHA256, Iterations: 4095, Salt: []byte("s"), SaltedPassword: []byte("p")}}, "x", kerr.UnacceptableCredential},
		{"too many iterations", nil, []ScramUpsertion{{User: "x", Mechanism: ScramSHA256, Iterations: 16385, Salt: []byte("s"), SaltedPassword: []byte("p")}}, "x", kerr.UnacceptableCredential},
		{"no salt", nil, []ScramUpsertion{{User: "x", Mechanism: ScramSHA256, Iterations: 4096, SaltedPassword: []byte("p")}}, "x", kerr.UnacceptableCredential},
		{"twice", []ScramDeletion{{"carol", ScramSHA256}}, []ScramUpsertion{upsert(t, "carol", ScramSHA256, "new", 4096)}, "carol", kerr.DuplicateResource},
		{"delete missing", []ScramDeletion{{"carol", ScramSHA512}}, nil, "carol", kerr.ResourceNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _, err := c.AlterScramUsers(tc.dels, tc.ups)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(res[tc.user], tc.want) {
				t.Fatalf("user %q: %v, want %v", tc.user, res[tc.user], tc.want)
			}
			if tc.user == "x" {
				if _, ok := c.ScramCredentialOf("x", ScramSHA256); ok {
					t.Fatal("a refused user's other change was applied")
				}
			}
		})
	}
	if cred, ok := c.ScramCredentialOf("carol", ScramSHA256); !ok || string(cred.Salt) != "salt-of-carol" {
		t.Fatalf("carol changed by refused requests: %+v %v", cred, ok)
	}
}

// TestScramUsersSurviveReopen: users are in the metadata log, in its log and its snapshots,
// and a change the log cannot take is rolled back.
func TestScramUsersSurviveReopen(t *testing.T) {
	clk := &fakeClock{}
	mem := vfs.NewMemFS(func() time.Time { return time.Unix(0, clk.Now()) })
	efs := vfs.NewErrorFS(mem)
	const dir = "/meta"
	c, _ := openStoreCtl(t, efs, dir, clk)
	mustAlter(t, c, nil, []ScramUpsertion{upsert(t, "alice", ScramSHA512, "pw", 4096), upsert(t, "bob", ScramSHA256, "pw", 4096)})
	mustAlter(t, c, []ScramDeletion{{"bob", ScramSHA256}}, nil)
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			return errors.New("injected fsync failure")
		}
		return nil
	})
	if _, _, err := c.AlterScramUsers(nil, []ScramUpsertion{upsert(t, "eve", ScramSHA256, "pw", 4096)}); !errors.Is(err, ErrMetadataLog) {
		t.Fatalf("alter with a failing metadata log: %v", err)
	}
	if _, ok := c.ScramCredentialOf("eve", ScramSHA256); ok {
		t.Fatal("a change the metadata log refused is visible")
	}
	efs.SetInjector(nil)
	c.Close()
	for gen := 0; gen < 2; gen++ {
		c2, _ := openStoreCtl(t, mem, dir, clk)
		if cred, ok := c2.ScramCredentialOf("alice", ScramSHA512); !ok || cred.Iterations != 4096 {
			t.Fatalf("generation %d: alice after reopen: %+v %v", gen, cred, ok)
		}
		if _, ok := c2.ScramCredentialOf("bob", ScramSHA256); ok {
			t.Fatalf("generation %d: bob's deleted credential came back", gen)
		}
		if _, ok := c2.ScramCredentialOf("eve", ScramSHA256); ok {
			t.Fatalf("generation %d: eve's refused credential came back", gen)
		}
		// A snapshot holds the users too: write one, then reopen from it.
		c2.mu.Lock()
		err := c2.mu.store.compact(c2.mu.durable.records())
		c2.mu.Unlock()
		if err != nil {
			t.Fatal(fmt.Errorf("compact: %w", err))
		}
		c2.Close()
	}
}
