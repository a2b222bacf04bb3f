package main

import (
	"context"
	"io"

	"github.com/isrbench/isrbench/gate"
)

func init() {
	register("noise", "summarise same-vs-same gates per metric (change and spread) to set gate thresholds from data", cmdNoise)
}

const noiseUsage = `noise GATE_DIR|gate.json...

Reads the gate.json of each gate directory and prints, per metric, over the gates: the median and
largest |change| of the medians between the two sides, the median and largest spread of one side's
runs ((max - min) / median), how many gates found the change significant (p < alpha) and how many
called it a regression, and the thresholds used. Run it over gates whose two sides are the same
build with the same settings (make gate with GATE_BASE=HEAD): every change is then noise, and a
metric's threshold should stand above its largest |change|.`

func cmdNoise(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("noise", noiseUsage, stderr)
	dirs, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		fs.Usage()
		return usagef("noise: want at least one gate directory")
	}
	vs, err := gate.ReadVerdicts(dirs)
	if err != nil {
		return usagef("%v", err)
	}
	return gate.PrintNoise(stdout, gate.Noise(vs))
}
