// Package gate is isrbench's performance-regression gate: it runs a workload several times on
// two sides, "base" and "new", and decides with benchstat's statistics (results.Compare:
// medians, confidence intervals, Mann-Whitney U) whether the new side regressed.
//
// # Plan
//
// A side is either recorded results (a baseline directory, LoadResults), this process running
// the workload (InProcess, given a run function), or a command: an isrbench binary run as a
// subprocess "isrbench run ... --out DIR" per repetition (Command, RunSpec.Args). Interleave
// runs two commands in rounds, A B A B ... (OrderAlternate), or in a random order within each
// round (OrderRandom, as RMIT does: randomized multiple interleaved trials), so that slow drifts
// of the machine's load, and any effect of a run on the next, hit both sides alike. Schedule is
// the order as data. BuildRevision builds the base side's binary from a git revision in a
// temporary worktree.
//
// # Verdict
//
// Judge compares the sides as one configuration each (OneConfig); PrintVerdict writes the table
// (golden-tested: testdata/verdict.golden), with each metric's spread, the range of a side's
// runs as a percentage of its median: the same-versus-same noise that the metric's threshold
// must stand above; WriteReport writes gate.json and report.html (results/report).
// WriteBaseline records a side's results as a committed baseline. Noise summarises many
// same-versus-same gates (their gate.json) per metric: the data to set thresholds from.
//
// # Concurrency
//
// The functions are independent and safe for concurrent use on different directories; a gate
// directory belongs to one gate.
package gate
