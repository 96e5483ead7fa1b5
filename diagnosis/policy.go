package diagnosis

// What a diagnosis means for a job beyond its words: which one says that
// NCCL runs degraded, and which ones a retry meets again. run's policy
// flags (--on-degraded, --misconfig-exit) act on them.

// Degraded is the diagnosis of NCCL running on a slower transport than
// the node offers.
const Degraded = "degraded-transport"

// misconfigIDs are the diagnoses of a deployment misconfiguration: a
// limit, mount, device, library or interface the pod or node was given
// wrong, which fails the same way on every retry. Causes a retry may not
// meet again (ib-transport, peer-lost, collective-timeout, cuda-oom, ...)
// are not here. A memlock limit that a user namespace keeps capabilities
// from bypassing is diagnosed as memlock.
var misconfigIDs = []string{"memlock", "shm", "rdma-device", "ibverbs-library", "socket-interface"}

// Misconfiguration is the first certain diagnosis of ds that is a
// deployment misconfiguration, "" for none. One such cause is enough: a
// retry meets it again, whatever else failed with it.
func Misconfiguration(ds []Diagnosis) string {
	for _, d := range ds {
		if d.Certainty != Certain {
			continue
		}
		for _, id := range misconfigIDs {
			if d.ID == id {
				return id
			}
		}
	}
	return ""
}
