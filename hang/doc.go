// Package hang reads what a hung job leaves behind while its processes
// still live: NCCL RAS's status over its client socket (ras.go), PyTorch's
// flight-recorder dumps (flightrecorder.go) and the Python stacks of the
// job's processes (stacks.go). Capture (capture.go) takes all of them
// within one budget into one directory.
//
// It never stops or signals a process and never writes to a process's
// output; deciding when a job hangs (the watchdog's lines, silence) and
// what to do then is the caller's. Do not use it to poll a healthy job:
// NCCL asks that RAS be queried only when a stall is suspected.
package hang
