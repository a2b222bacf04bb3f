// Package specs holds the workload specs embedded in the isrbench binary: the *.yaml files of
// this directory, which `-w NAME` loads by name (see package spec). It holds data only.
package specs

import "embed"

// FS holds the embedded specs, at its root as NAME.yaml. It is read-only and safe for
// concurrent use.
//
//go:embed *.yaml
var FS embed.FS
