package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 48, min: 0, max: 1, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeClientQuotas(req.(*kmsg.DescribeClientQuotasRequest))
	}})
}

// Client quota entity types and match types (Kafka's ClientQuotaEntity and
// DescribeClientQuotasRequest constants).
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"

	quotaMatchExact     = 0 // MATCH_TYPE_EXACT: the named entity (match null: the default entity)
	quotaMatchDefault   = 1 // MATCH_TYPE_DEFAULT: the default entity (match must be null)
	quotaMatchSpecified = 2 // MATCH_TYPE_SPECIFIED: any named entity (match must be null)
)

// handleDescribeClientQuotas answers DescribeClientQuotas (KIP-546, kafka-configs.sh
// --describe --entity-type users/clients/ips) as a Kafka cluster without quotas configured
// does: the filter is checked as KRaft's ClientQuotasImage.describe checks it, then the
// answer is an empty list of entries. isrbench enforces no quotas and AlterClientQuotas is
// not served, so there is never an entry to describe. Filter errors answer the whole request:
// INVALID_REQUEST for an empty entity type, one given twice, a match string with
// MATCH_TYPE_DEFAULT or MATCH_TYPE_SPECIFIED, none with MATCH_TYPE_EXACT, or ip combined with
// user or client-id; UNSUPPORTED_VERSION for an unknown entity type or match type.
func (c *conn) handleDescribeClientQuotas(req *kmsg.DescribeClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if err := checkQuotaFilter(req.Components); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), errMessage(err)
		return resp, nil
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{} // none: no quotas configured
	return resp, nil
}

func checkQuotaFilter(components []kmsg.DescribeClientQuotasRequestComponent) error {
	seen := map[string]bool{}
	for _, comp := range components {
		switch {
		case comp.EntityType == "":
			return fmt.Errorf("invalid empty entity type: %w", kerr.InvalidRequest)
		case seen[comp.EntityType]:
			return fmt.Errorf("entity type %s cannot appear more than once in the filter: %w", comp.EntityType, kerr.InvalidRequest)
		case comp.EntityType != quotaEntityUser && comp.EntityType != quotaEntityClientID && comp.EntityType != quotaEntityIP:
			return fmt.Errorf("unsupported entity type %s (want user, client-id or ip): %w", comp.EntityType, kerr.UnsupportedVersion)
		}
		seen[comp.EntityType] = true
		switch comp.MatchType {
		case quotaMatchExact:
			if comp.Match == nil {
				return fmt.Errorf("request specified MATCH_TYPE_EXACT, but set match string to null: %w", kerr.InvalidRequest)
			}
		case quotaMatchDefault:
			if comp.Match != nil {
				return fmt.Errorf("request specified MATCH_TYPE_DEFAULT, but also specified a match string: %w", kerr.InvalidRequest)
			}
		case quotaMatchSpecified:
			if comp.Match != nil {
				return fmt.Errorf("request specified MATCH_TYPE_SPECIFIED, but also specified a match string: %w", kerr.InvalidRequest)
			}
		default:
			return fmt.Errorf("unsupported match type %d (want 0 exact, 1 default or 2 specified): %w", comp.MatchType, kerr.UnsupportedVersion)
		}
	}
	if seen[quotaEntityIP] && (seen[quotaEntityUser] || seen[quotaEntityClientID]) {
		return fmt.Errorf("invalid entity filter component combination: the ip filter component should not be used with the user or client-id filter component: %w", kerr.InvalidRequest)
	}
	return nil
}
