//go:build !amd64 || purego

package diagnosis

// firstHitWide is firstHit's vector path where there is one (amd64).
func (f *gramFilter) firstHitWide(b []byte) (hit, from int) { return -1, 0 }
