package hang

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"time"

	"github.com/ncclrun/ncclrun/internal/safefile"
)

// DefaultBudget is how long one capture may take, all of it: RAS and the
// stacks are taken at once, and what is not in by then is left out.
const DefaultBudget = time.Second

// Options say what Capture takes and where it puts it.
type Options struct {
	// Dir is the evidence directory; it must exist. "": nothing is
	// written, the Evidence is all there is.
	Dir string
	// RASAddr is the job's NCCL_RAS_ADDR; "" leaves RAS out.
	RASAddr string
	// PySpy is py-spy's path and PIDs the processes it dumps; "" leaves
	// the stacks out, and StacksOff says why.
	PySpy     string
	PIDs      []int
	StacksOff string
	// FRPipes is the job's TORCH_NCCL_DEBUG_INFO_PIPE_FILE; "" leaves the
	// flight-recorder pipes alone (AskDumps).
	FRPipes string
	// Budget bounds the whole capture; 0 is DefaultBudget.
	Budget time.Duration
}

// Evidence is what one capture took. Its JSON is written to
// capture.json in Dir; RAS's report as it came is ras-status.json or
// ras-status.txt, each process's stacks stacks-<pid>.txt.
type Evidence struct {
	Dir     string     `json:"dir"`
	Time    time.Time  `json:"time"`
	Elapsed string     `json:"elapsed"`
	RAS     *RASStatus `json:"ras,omitempty"`
	RASFile string     `json:"ras_file,omitempty"`
	Stacks  []Stack    `json:"stacks,omitempty"`
	// StacksOff says why there are no py-spy stacks (not installed, ...).
	StacksOff string `json:"stacks_off,omitempty"`
	// FRPipes are the ranks asked for a flight-recorder dump.
	FRPipes []Pipe `json:"fr_pipes,omitempty"`
}

// Asked are the ranks whose pipe took the request for a dump.
func (ev Evidence) Asked() []int {
	var ranks []int
	for _, p := range ev.FRPipes {
		if p.Error == "" {
			ranks = append(ranks, p.Rank)
		}
	}
	return ranks
}

// Capture takes RAS's status (twice where ranks lag: ConfirmBehind) and
// the processes' Python stacks, and asks each rank for its
// flight-recorder dump, at once, within the budget, into o.Dir (the dumps
// come later, where the job's torch writes them). It never fails: what it
// could not take says why in the Evidence.
func Capture(ctx context.Context, o Options) Evidence {
	start := time.Now()
	budget := o.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	ev := Evidence{Dir: o.Dir, Time: start.UTC(), StacksOff: o.StacksOff}
	var wg sync.WaitGroup
	if o.RASAddr != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := QueryRAS(ctx, o.RASAddr)
			if len(st.Behind) > 0 {
				select {
				case <-time.After(RASRecheck):
					st = ConfirmBehind(st, QueryRAS(ctx, o.RASAddr))
				case <-ctx.Done():
					st.Recheck = "no time left for a second query"
				}
			}
			ev.RAS = &st
		}()
	}
	if o.PySpy != "" && len(o.PIDs) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev.Stacks = PySpy(ctx, o.PySpy, o.Dir, o.PIDs)
		}()
	}
	if o.FRPipes != "" {
		ev.FRPipes = AskDumps(o.FRPipes)
	}
	wg.Wait()
	if o.Dir == "" {
		ev.Elapsed = time.Since(start).Round(time.Millisecond).String()
		return ev
	}
	if ev.RAS != nil && len(ev.RAS.Raw) > 0 {
		name := "ras-status.txt"
		if ev.RAS.Format == "json" {
			name = "ras-status.json"
		}
		p := filepath.Join(o.Dir, name)
		if err := safefile.WriteFile(p, ev.RAS.Raw, 0o644); err == nil {
			ev.RASFile = p
		}
	}
	ev.Elapsed = time.Since(start).Round(time.Millisecond).String()
	if b, err := json.MarshalIndent(ev, "", "  "); err == nil {
		_ = safefile.WriteFile(filepath.Join(o.Dir, "capture.json"), append(b, '\n'), 0o644)
	}
	return ev
}
