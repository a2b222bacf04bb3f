package workloads

import (
	"fmt"
	"regexp"
	"strconv"

	htmlreport "github.com/isrbench/isrbench/results/report"
	"github.com/isrbench/isrbench/workloads/spec"
)

// kafkaDefaultRe finds the Kafka default a param's help names where isrbench's own default
// differs ("harness default 67108864 (Kafka 1073741824)").
var kafkaDefaultRe = regexp.MustCompile(`\(Kafka:? (-?[0-9]+)\)`)

// ReportDefaults are the defaults of every config key for report.html: DefaultSpec's value of
// each param, and Kafka's own default where a param's help says that isrbench's differs from
// it. The spec's name and description are labels, not settings, and have none.
func ReportDefaults() map[string]htmlreport.Default {
	def := spec.DefaultSpec()
	out := make(map[string]htmlreport.Default, len(spec.Params()))
	for _, p := range spec.Params() {
		if p.Key == "name" || p.Key == "description" {
			continue
		}
		d := htmlreport.Default{Value: p.Get(def)}
		if m := kafkaDefaultRe.FindStringSubmatch(p.Help); m != nil {
			if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
				d.Kafka = n
			}
		}
		out[p.Key] = d
	}
	// Config() renders durations as strings: so do the defaults.
	cfg := def.Config()
	for k, d := range out {
		if v, ok := cfg[k]; ok {
			d.Value = v
			out[k] = d
		}
	}
	out["faults"] = htmlreport.Default{Value: 0}
	return out
}

// reportOptions are the report options of a run or sweep directory.
func reportOptions() htmlreport.Options { return htmlreport.Options{Defaults: ReportDefaults()} }

// writeRunReport writes <dir>/report.html from the run's files.
func writeRunReport(dir string) error {
	if _, err := htmlreport.WriteRun(dir, reportOptions()); err != nil {
		return fmt.Errorf("writing %s: %w", htmlreport.FileName, err)
	}
	return nil
}

// writeSweepReport writes the sweep's report.html; a sweep without any result has none.
func writeSweepReport(dir string, out *SweepOutcome) error {
	if len(out.Results) == 0 {
		return nil
	}
	if _, err := htmlreport.WriteSweep(dir, reportOptions()); err != nil {
		return fmt.Errorf("writing %s: %w", htmlreport.FileName, err)
	}
	return nil
}
