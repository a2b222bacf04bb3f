package netfetch

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// role is the pprof role label of the goroutine handling a request.
type role int8

const (
	roleAdmin      role = iota // role=admin
	roleProduce                // role=produce
	roleFetchServe             // role=fetch-serve (Fetch and the replica protocol)
)

// api is one API key the server answers, registered by the file of that key (NN_name.go)
// from its init function.
type api struct {
	key      int16
	min, max int16 // inclusive version range advertised in ApiVersions
	role     role
	// handle answers a decoded request; a nil response sends nothing (acks=0 produce). An
	// error closes the connection (logged unless the peer went away).
	handle func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error)
	// serve, when set instead of handle, writes the response itself (Fetch, ApiVersions).
	serve func(c *conn, h reqHeader, req kmsg.Request) error
	// newReq returns the object a request of this key is decoded into (nil =
	// kmsg.RequestForKey): a connection may reuse one for its hot APIs.
	newReq func(c *conn) kmsg.Request
	// raw, when set instead, gets the undecoded body and every version, even outside
	// [min, max] (ApiVersions must answer those with UNSUPPORTED_VERSION).
	raw func(c *conn, h reqHeader, req kmsg.Request, body []byte) error
}

// apis is indexed by API key; filled by register during package initialization and
// read-only afterwards.
var apis [maxAPIKey]*api

// register adds an API; a duplicate or out-of-range key is a programming error.
func register(a api) {
	n := 0
	for _, set := range []bool{a.handle != nil, a.serve != nil, a.raw != nil} {
		if set {
			n++
		}
	}
	if a.key < 0 || int(a.key) >= maxAPIKey || apis[a.key] != nil || a.min > a.max || n != 1 {
		panic(fmt.Sprintf("BUG: netfetch: bad or duplicate API registration for key %d (%s)", a.key, kmsg.NameForKey(a.key)))
	}
	apis[a.key] = &a
}

// lookupAPI returns the registered API of key, or nil.
func lookupAPI(key int16) *api {
	if key < 0 || int(key) >= maxAPIKey {
		return nil
	}
	return apis[key]
}

// versionRange is the inclusive range of versions advertised for one API key.
type versionRange struct{ key, min, max int16 }

// supported returns the advertised version range of key.
func supported(key int16) (versionRange, bool) {
	a := lookupAPI(key)
	if a == nil {
		return versionRange{}, false
	}
	return versionRange{key: a.key, min: a.min, max: a.max}, true
}

// advertised lists every registered API's version range, by key.
func advertised() []versionRange {
	var out []versionRange
	for _, a := range apis {
		if a != nil {
			out = append(out, versionRange{key: a.key, min: a.min, max: a.max})
		}
	}
	slices.SortFunc(out, func(x, y versionRange) int { return int(x.key) - int(y.key) })
	return out
}

// requestFor returns the request object to decode a request of key into: the API's own
// (reused) one, a new kmsg one, or nil for a key kmsg does not know.
func (c *conn) requestFor(key int16) kmsg.Request {
	if a := lookupAPI(key); a != nil && a.newReq != nil {
		return a.newReq(c)
	}
	return kmsg.RequestForKey(key)
}
