package netfetch

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the inclusive range of versions advertised for one API key.
type versionRange struct{ key, min, max int16 }

// apiVersions lists every API this server answers, with the versions the
// franz-go client (kgo/kadm) and librdkafka (kcat) negotiate. Fetch stops
// at v12: v13+ names topics by ID (KIP-516), which Metadata does not hand out.
var apiVersions = []versionRange{
	{key: 0, min: 3, max: 9},  // Produce
	{key: 1, min: 4, max: 12}, // Fetch
	{key: 2, min: 1, max: 7},  // ListOffsets
	{key: 3, min: 1, max: 12}, // Metadata (topic IDs are zero)
	{key: 18, min: 0, max: 3}, // ApiVersions
	{key: 19, min: 2, max: 7}, // CreateTopics
	{key: 22, min: 0, max: 4}, // InitProducerId
	{key: 23, min: 2, max: 4}, // OffsetForLeaderEpoch
	{key: 32, min: 0, max: 4}, // DescribeConfigs
}

func supported(key int16) (versionRange, bool) {
	for _, v := range apiVersions {
		if v.key == key {
			return v, true
		}
	}
	return versionRange{}, false
}

// handleAPIVersions answers ApiVersions. A version above our maximum gets
// UNSUPPORTED_VERSION with our ranges encoded as v0 (which every client can
// parse) so that the client retries with a version we support. The
// response header is always v0 (no tagged fields), even for flexible versions.
func (c *conn) handleAPIVersions(h reqHeader, req kmsg.Request, rest []byte) error {
	vr, _ := supported(18)
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, v := range apiVersions {
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: v.key, MinVersion: v.min, MaxVersion: v.max})
	}
	if h.version > vr.max || h.version < 0 {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.SetVersion(0)
		return c.writeResponse(h, resp)
	}
	if err := req.ReadFrom(rest); err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.SetVersion(h.version)
		if err := c.writeResponse(h, resp); err != nil {
			return err
		}
		return closef("malformed ApiVersions v%d request: %v", h.version, err)
	}
	resp.SetVersion(h.version)
	return c.writeResponse(h, resp)
}
