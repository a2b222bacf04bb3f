// Package report builds report.html: one self-contained page per run, per sweep and per
// comparison of run sets (a gate's base and new sides, several run directories).
//
// A page holds everything it needs inline: the stylesheet, a small SVG charting script of this
// package (assets/report.js) and the data section, a JSON block
// (<script type="application/json" id="isrbench-data">) that the script draws its charts from.
// Tables (summary, ISR events, faults, durability, cost, configuration, files, gate verdict)
// are rendered into the HTML itself, so they read and print without the script; every chart
// also gets its data as a table under it (built by the script from the same JSON).
//
// What a page shows:
//
//   - a run (BuildRun): the summary table; ack, HW-lag, end-to-end and send-delay percentile
//     distributions on HdrHistogram's percentile axis (x = 1/(1-q), log scale, labelled 90%,
//     99%, 99.9%, ...), taken from the lossless HdrHistogram encodings in result.json (the .hgrm
//     files when a result has none); the timeline (timeline.csv: throughput, interval p99 ack
//     and HW lag, ISR size, under-replicated partitions, errors) with each fault's window
//     shaded and labelled, plus the per-partition ISR of partitions.csv; the ISR shrink and
//     expand events (faults.json); durability; the cost per record when result.json has a
//     "cost" object (read as generic key/number pairs); the effective configuration with the
//     values that differ from their defaults (Options.Defaults) marked; links to the raw files
//     and profiles;
//   - a sweep (BuildSweep) or a comparison (BuildComparison, BuildGate): one point per
//     configuration (per side for a gate), each varied key against each metric (median and
//     min..max over the repetitions), the latency distributions of the points overlaid
//     (histograms of a point's repetitions merged), the gate's verdict per metric (gate.json,
//     written by WriteGate), and links to every run's own report.
//
// Long runs stay small: timelines are reduced to at most MaxTimelinePoints points per series
// (each point a bucket of consecutive intervals: rates averaged, percentiles and ISR sizes
// keep their extremes, errors summed), ISR events to MaxISREvents; the percentile
// distributions keep full resolution.
//
// Lifecycle: Build* read run directories and return a Data value; Write renders it to a file
// atomically. WriteRun, WriteSweep and WriteGate do both for the runner, the sweep and the
// gate. Every function here is safe for concurrent use on distinct arguments; a Data is a plain
// value.
//
// report imports results and the standard library only.
package report
