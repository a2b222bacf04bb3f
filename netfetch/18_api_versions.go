package netfetch

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 18, min: 0, max: 3, raw: (*conn).handleAPIVersions})
}

// handleAPIVersions answers ApiVersions. A version above our maximum gets
// UNSUPPORTED_VERSION with our ranges encoded as v0 (which every client can
// parse) so that the client retries with a version we support. The
// response header is always v0 (no tagged fields), even for flexible versions.
func (c *conn) handleAPIVersions(h reqHeader, req kmsg.Request, rest []byte) error {
	vr, _ := supported(18)
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, v := range advertised() {
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
