package kafkatool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// DefaultSCRAMIterations is Kafka's default for a SCRAM credential given without iterations.
const DefaultSCRAMIterations = 4096

// ParseSCRAMConfigs reads kafka-configs' --add-config and --delete-config for --entity-type
// users: "SCRAM-SHA-256=[iterations=8192,password=PW],SCRAM-SHA-512=[password=PW]" and
// "SCRAM-SHA-512". Errors name the mechanism or the field, never the password.
func ParseSCRAMConfigs(user, add, del string) ([]kadm.UpsertSCRAM, []kadm.DeleteSCRAM, error) {
	var ups []kadm.UpsertSCRAM
	var dels []kadm.DeleteSCRAM
	for _, kv := range SplitConfigs(add) {
		name, v, ok := strings.Cut(kv, "=")
		mech, err := scramMechanism(name)
		if err != nil {
			return nil, nil, err
		}
		if !ok || !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
			return nil, nil, fmt.Errorf("--add-config %s: want %s=[iterations=N,password=...] (iterations optional, default %d)", name, name, DefaultSCRAMIterations)
		}
		u := kadm.UpsertSCRAM{User: user, Mechanism: mech, Iterations: DefaultSCRAMIterations}
		for _, f := range strings.Split(v[1:len(v)-1], ",") {
			fk, fv, _ := strings.Cut(f, "=")
			switch strings.TrimSpace(fk) {
			case "password":
				u.Password = fv
			case "iterations":
				n, err := strconv.ParseInt(strings.TrimSpace(fv), 10, 32)
				if err != nil || n < 4096 || n > 16384 {
					return nil, nil, fmt.Errorf("--add-config %s: iterations %q; allowed 4096..16384", name, fv)
				}
				u.Iterations = int32(n)
			default:
				return nil, nil, fmt.Errorf("--add-config %s: unknown field %q; allowed iterations and password", name, strings.TrimSpace(fk))
			}
		}
		if u.Password == "" {
			return nil, nil, fmt.Errorf("--add-config %s: no password; want %s=[password=...]", name, name)
		}
		ups = append(ups, u)
	}
	for _, name := range SplitConfigs(del) {
		mech, err := scramMechanism(name)
		if err != nil {
			return nil, nil, err
		}
		dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: mech})
	}
	return ups, dels, nil
}

func scramMechanism(name string) (kadm.ScramMechanism, error) {
	switch strings.TrimSpace(name) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("users: config %q; allowed SCRAM-SHA-256 and SCRAM-SHA-512", strings.TrimSpace(name))
}

// AlterUserSCRAM sets and deletes a user's SCRAM credentials (AlterUserScramCredentials), as
// kafka-configs.sh --alter --entity-type users does.
func AlterUserSCRAM(ctx context.Context, adm *kadm.Client, user string, ups []kadm.UpsertSCRAM, dels []kadm.DeleteSCRAM, w io.Writer) error {
	rs, err := adm.AlterUserSCRAMs(ctx, dels, ups)
	if err != nil {
		return fmt.Errorf("configs: alter user %s: %w", user, err)
	}
	var errs []error
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("user %s: %w%s", r.User, r.Err, errDetail(r.ErrMessage)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("configs: alter user %s: %w", user, errors.Join(errs...))
	}
	fmt.Fprintf(w, "Completed updating config for user %s.\n", user)
	return nil
}

// DescribeUserSCRAM prints the SCRAM credentials (mechanism and iterations, never a salt or
// key) of user, or of every user when user is "", as kafka-configs.sh --describe does.
func DescribeUserSCRAM(ctx context.Context, adm *kadm.Client, user string, w io.Writer) error {
	var users []string
	if user != "" {
		users = []string{user}
	}
	ds, err := adm.DescribeUserSCRAMs(ctx, users...)
	if err != nil {
		return fmt.Errorf("configs: describe users: %w", err)
	}
	for _, d := range ds.Sorted() {
		if d.Err != nil {
			return fmt.Errorf("configs: describe user %s: %w%s", d.User, d.Err, errDetail(d.ErrMessage))
		}
		infos := make([]string, len(d.CredInfos))
		for i, c := range d.CredInfos {
			infos[i] = c.String()
		}
		fmt.Fprintf(w, "SCRAM credential configs for user-principal '%s' are %s\n", d.User, strings.Join(infos, ", "))
	}
	return nil
}
