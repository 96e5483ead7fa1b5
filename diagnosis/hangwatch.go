package diagnosis

// ScanHangs makes the Watch read every line it is fed for hang evidence
// too (HangScan); call it before the first Feed. node is this host, world
// and perNode the job's size as CMD tells it (WorldFromCommand).
func (w *Watch) ScanHangs(node string, world, perNode int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hang = NewHangScan(node, world, perNode)
}

// Hang is the hang the Watch saw (nil when no collective timed out, or
// ScanHangs was not called) and the node's view, which --report carries
// for explain to merge with the other nodes'.
func (w *Watch) Hang() (*Hang, *HangView) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hang == nil {
		return nil, nil
	}
	v := w.hang.View()
	h := JobHang([]HangView{v})
	if h == nil {
		return nil, nil
	}
	return h, &v
}
