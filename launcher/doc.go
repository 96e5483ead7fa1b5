// Package launcher supervises one child process the way a container
// entrypoint must: it starts the command with the limits, capabilities,
// user and environment it is given, relays the child's stdout and stderr
// byte for byte (a pseudo terminal where ncclrun's own stream is one),
// hands a copy of the output's lines to a Tap, forwards signals,
// reaps every process (as PID 1 or a child subreaper) and returns the exit
// status as the shell would report it (128+N for a signal).
//
// The flow of Run: plan (look the command up, resolve the user, check the
// capabilities, decide between a direct fork and the trampoline) -> start
// (syscall.ForkExec, or ncclrun re-executed as a trampoline that drops
// capabilities and sets limits on one locked thread before execve) ->
// relay and tap -> signals -> reap -> Result. Every signal is caught
// before the fork, with one signal.Notify. Exec replaces ncclrun with the
// command after the same plan (--no-watch). A binary that uses the
// trampoline calls MaybeTrampoline first thing in main.
//
// The launcher knows nothing of NCCL, preflight or diagnoses: what to give
// the child comes in Config (cmd/ncclrun fills it from preflight's report),
// and its output leaves only through the relay and Config.Tap, so a
// matcher can be fed without this package knowing one exists. What kind
// of command CMD is (internal/cmdkind) is the caller's: it reaches the
// launcher as plain Config (Args with what must be inserted, CheckpointTo).
//
// Do not use it to run several children at once (Run owns waiting for every
// child of the process while it runs), from a library that shares its
// process with other code that waits for children, or outside Linux, where
// Run, Exec and RaiseMemlock return ErrUnsupported.
package launcher
