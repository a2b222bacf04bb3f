// Package vfs is the small file-system interface under isrbench's storage (core/log, the
// checkpoints, the controller's metadata log), in the spirit of pebble's vfs: OS is the
// operating system's file system; MemFS is an in-memory one whose CrashClone keeps only what
// was fsynced, and which can fail operations on demand (SetInjector, SetCapacity), so tests and
// the deterministic simulator can crash a broker's disk or fill it.
//
// What survives a crash in MemFS (the model of a journaling Linux file system): file contents
// only once the file was Synced; creations, removals, renames and truncations at once. A strict
// MemFS (NewStrictMemFS, as pebble's strict MemFS and CrashClone) keeps directory entries only
// once their directory was synced (SyncDir) after the change; the simulator's disks are strict.
//
// DeferFS and HoldFS are views that hold fsyncs back and make what was written through them
// durable with one syncfs(2) (FSSyncer): a batch of new replicas, a broker's clean shutdown.
//
// Concurrency: OS and MemFS are safe for concurrent use; a File is as safe as *os.File.
package vfs
