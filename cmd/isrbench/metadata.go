package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register("metadata", "check the cluster metadata log of a data directory, or cut it at a record damaged in both copies (--repair)", cmdMetadata)
}

// cmdMetadata reads a `serve` data directory's metadata log (or a metadata directory) as a
// start would, without changing it, and says what it holds: records per file, torn tails,
// records one copy supplies for the other, damage. It exits 1 when a start would be refused.
// With --repair it cuts the log at a record damaged in both copies and lists every record
// the cut loses.
func cmdMetadata(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("metadata", "metadata --dir DIR [--repair]", stderr)
	dir := fs.String("dir", "", "a `serve` data directory, or its metadata directory")
	repair := fs.Bool("repair", false, "cut the metadata log at a record damaged in both copies (loses every later record, listed)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() != 0 {
		return usagef("metadata: --dir DIR is required, and nothing else")
	}
	mdir := *dir
	if fi, err := os.Stat(filepath.Join(mdir, cluster.MetadataDir)); err == nil && fi.IsDir() {
		mdir = filepath.Join(mdir, cluster.MetadataDir)
	}
	if fi, err := os.Stat(mdir); err != nil || !fi.IsDir() {
		return usagef("metadata: %s is not a directory (%v)", mdir, err)
	}
	var rep controller.MetadataReport
	var err error
	if *repair {
		rep, err = controller.RepairMetadata(nil, mdir)
	} else {
		rep, err = controller.CheckMetadata(nil, mdir)
	}
	fmt.Fprintf(stdout, "metadata dir %s, generation %d\n", rep.Dir, rep.Generation)
	for _, l := range rep.Lines {
		fmt.Fprintln(stdout, l)
	}
	if err != nil {
		return err
	}
	if c := rep.Cut; c != nil {
		fmt.Fprintf(stdout, "repaired: cut %s at offset %d (batch %d); lost:\n", c.File, c.Offset, c.Batch)
		for _, l := range rep.Lost {
			fmt.Fprintf(stdout, "  lost: %s\n", l)
		}
		fmt.Fprintln(stdout, "a lost partition record can let a replica that was no longer in sync lead: check the replicas before producing")
		return nil
	}
	if d := rep.Damage; d != nil {
		return fmt.Errorf("a start would be refused: %s is damaged at offset %d (batch %d) in both copies; --repair cuts it there", d.File, d.Offset, d.Batch)
	}
	fmt.Fprintln(stdout, "a start would load it")
	return nil
}
