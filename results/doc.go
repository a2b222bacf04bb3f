// Package results owns what a benchmark run leaves behind and how runs are compared:
//
//   - result.json (schema 1): Result and its parts, WriteResult / ReadResult / DecodeResult
//     (errors name the file, the field and the line), CurrentEnv;
//   - latency histograms: Histogram is an HdrHistogram of MICROSECOND values, 1 µs .. 60 s, 3
//     significant digits. Record takes µs, RecordNs takes ns (rounded to the nearest µs); values
//     below 0 or above 60 s are clamped into range and counted (Clamped). Summarize turns one into
//     the result.json Summary (count, mean, p50..p99.99, max, and the whole histogram as base64
//     HdrHistogram V2 compressed encoding, which DecodeSummaryHdr reads back);
//   - .hgrm files: WriteHgrm writes HdrHistogram's standard percentile distribution (Java's
//     outputPercentileDistribution layout, 5 ticks per half distance, values in µs, scaling
//     ratio 1) that HdrHistogram's plotter reads; ParseHgrm reads it back;
//   - bench.txt: WriteBench writes Go benchmark format lines that benchstat reads
//     (BenchmarkReplication/<spec>/<key=value>...-<cpus> N v records/s v MB/s v p50-ack-µs ...);
//   - timeline.csv: Timeline with fixed columns (TimelineColumns) plus caller-chosen extras;
//   - tables (PrintSummary, PrintSweep, PrintCompare) and PNG plots (PlotLatency, PlotTimeline);
//     the self-contained report.html pages are package results/report;
//   - compare / regression gate: LoadResults, GroupResults, Compare (benchmath: medians, 95% CI,
//     Mann-Whitney U), with a regression only when a change is in the worse direction, significant
//     (p < alpha) and larger than the metric's minimum change.
//
// Lifecycle: a runner creates one Histogram per producer goroutine (or a Recorder for values
// recorded from many goroutines, such as HW-lag callbacks), merges them when the run ends,
// Summarizes them into a Result, writes timeline.csv while it runs and then the .hgrm files,
// bench.txt, the plots and result.json into the run directory in one call (WriteRun), and
// prints PrintSummary. compare / gate read result.json files
// back with LoadResults; they use the summary fields (p50, p99, ...), not the hdr encoding.
//
// Concurrency: Histogram, Timeline and Result have no locks: one goroutine owns each (Merge
// owners' histograms after they stop). Recorder is safe for concurrent use (one small mutex).
// The Print*, Plot*, Write*, Read*, Load* and Compare functions are safe to call concurrently on
// distinct arguments.
//
// results imports no core package.
package results
