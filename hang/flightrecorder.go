package hang

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"

	"github.com/ncclrun/ncclrun/internal/safefile"
)

// PyTorch's flight recorder (torch/csrc/distributed/c10d/FlightRecorder*)
// keeps the last N collectives of each rank and, on a watchdog timeout,
// pickles them (protocol 2, torch::jit::Pickler) to <prefix><global rank>.
// The top level is a dict: "version" (the format's, not torch's),
// "pg_config" (PG name -> {name, desc, ranks}), "pg_status" (pg_id ->
// {last_enqueued_collective, last_started_collective,
// last_completed_collective}, absent in the oldest formats) and "entries"
// (one dict a collective: pg_id, process_group (name, desc),
// collective_seq_id and p2p_seq_id ("seq_id" in the oldest), profiling_name
// like "nccl:all_reduce", input_sizes, output_sizes, state
// "scheduled|started|completed", is_p2p, timeout_ms, frames, ...). The
// earliest builds wrote the entries' list alone.

// Bounds of one dump: a file over MaxDumpSize, or one whose unpickling
// would take more than maxDumpCost bytes of memory (checkPickle's
// estimate: 2000 entries, the default buffer, take about 30 MiB), is not
// unpickled; MaxStalled entries a process group are summarised.
const (
	MaxDumpSize = 16 << 20
	maxDumpCost = 128 << 20
	MaxStalled  = 8
	maxPGs      = 64
	// MaxDumps bounds the dumps read from one directory.
	MaxDumps = 256
)

// maxDumpEntries bounds the directory entries rankFiles looks at: the
// directory is CMD's (its user's under --user), and a listing of millions
// of names would cost ncclrun hundreds of MB and seconds.
var maxDumpEntries = 1 << 16

// Dump is one rank's flight-recorder dump, summarised.
type Dump struct {
	File string `json:"file"`
	// Rank is the global rank, from the file name's suffix; -1 unknown.
	Rank    int       `json:"rank"`
	Version string    `json:"version,omitempty"`
	Entries int       `json:"entries"`
	PGs     []PGTrace `json:"pgs,omitempty"`
	// Error says why the dump was not (wholly) read.
	Error string `json:"error,omitempty"`
}

// PGTrace is one process group of a dump. The last_* counters are
// pg_status's where the dump has it, else computed from the entries; -1:
// none. Stalled are the entries not completed after LastCompleted, oldest
// first (at most MaxStalled): the collective the rank was stuck in and
// what it queued after it.
type PGTrace struct {
	PG            string    `json:"pg"` // pg_id
	Name          string    `json:"name,omitempty"`
	Desc          string    `json:"desc,omitempty"`
	Ranks         string    `json:"ranks,omitempty"` // pg_config's, global ranks
	LastEnqueued  int64     `json:"last_enqueued"`
	LastStarted   int64     `json:"last_started"`
	LastCompleted int64     `json:"last_completed"`
	Stalled       []FREntry `json:"stalled,omitempty"`
	status        bool      // the counters are pg_status's
}

// FREntry is one recorded collective or point-to-point operation. Seq is
// its collective_seq_id, or p2p_seq_id when P2P.
type FREntry struct {
	Seq         int64     `json:"seq"`
	P2P         bool      `json:"p2p,omitempty"`
	Op          string    `json:"op"`
	State       string    `json:"state,omitempty"`
	InputSizes  [][]int64 `json:"input_sizes,omitempty"`
	OutputSizes [][]int64 `json:"output_sizes,omitempty"`
	Dtypes      []string  `json:"dtypes,omitempty"`
	TimeoutMs   int64     `json:"timeout_ms,omitempty"`
}

// ReadDump reads and summarises one dump from r, at most MaxDumpSize
// bytes of it. Whatever the input (truncated, hostile), it returns in time
// linear in those bytes and memory bounded by them; what could not be
// read is in the error (and the Dump holds what could).
func ReadDump(r io.Reader) (Dump, error) {
	d := Dump{Rank: -1}
	b, err := io.ReadAll(io.LimitReader(r, MaxDumpSize+1))
	if err != nil {
		return d, fmt.Errorf("read: %w", err)
	}
	if len(b) > MaxDumpSize {
		return d, fmt.Errorf("over %d bytes: not read", MaxDumpSize)
	}
	v, err := unpickle(b)
	if err != nil {
		return d, err
	}
	summariseDump(&d, v)
	return d, nil
}

// unpickle checks b's bounds (checkPickle), then unpickles it. A panic of
// the unpickler on malformed input is an error.
func unpickle(b []byte) (v any, err error) {
	n, err := checkPickle(b, maxDumpCost)
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("malformed pickle: %v", p)
		}
	}()
	u := pickle.NewUnpickler(strings.NewReader(string(b[:n])))
	u.FindClass = findClass
	u.PersistentLoad = func(any) (any, error) { return nil, errors.New("persistent ids are not part of a dump") }
	return u.Load()
}

// findClass resolves the globals torch::jit::Pickler writes around
// containers (torch.jit._pickle.build_intlist and the like for typed
// lists, restore_type_tag(container, type) for tagged ones) to the
// container itself; any other global stays an inert generic object: no
// code is named, none runs.
func findClass(module, name string) (any, error) {
	if module == "torch.jit._pickle" && (strings.HasPrefix(name, "build_") || name == "restore_type_tag") {
		return firstArg{}, nil
	}
	return types.NewGenericClass(module, name), nil
}

type firstArg struct{}

func (firstArg) Call(args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("torch.jit._pickle: no argument")
	}
	return args[0], nil
}

func summariseDump(d *Dump, v any) {
	var entries *types.List
	var top *types.Dict
	switch t := v.(type) {
	case *types.List: // the earliest builds: the entries alone
		entries = t
	case *types.Dict:
		top = t
		d.Version = clip(str(get(t, "version")), 32)
		entries, _ = get(t, "entries").(*types.List)
	default:
		d.Error = fmt.Sprintf("not a flight-recorder dump (a %T at the top)", v)
		return
	}
	// The entries first: they name each group by id and by name, which
	// pg_status (by id) and pg_config (by name) then find.
	byPG := map[*PGTrace][]FREntry{}
	if entries != nil {
		d.Entries = entries.Len()
		for i := 0; i < entries.Len(); i++ {
			e, ok := entries.Get(i).(*types.Dict)
			if !ok {
				continue
			}
			pgID, name, desc := pgOf(e)
			if pg := d.pg(pgID, name, desc); pg != nil {
				byPG[pg] = append(byPG[pg], entryOf(e))
			}
		}
	}
	if top != nil {
		readPGs(d, top)
	}
	for i := range d.PGs {
		finishPG(&d.PGs[i], byPG[&d.PGs[i]])
	}
	sort.Slice(d.PGs, func(i, j int) bool { return pgLess(d.PGs[i].PG, d.PGs[j].PG) })
}

// readPGs reads pg_config and pg_status.
func readPGs(d *Dump, top *types.Dict) {
	if cfg, ok := get(top, "pg_config").(*types.Dict); ok {
		for _, kv := range *cfg {
			c, ok := kv.Value.(*types.Dict)
			if !ok {
				continue
			}
			name := str(get(c, "name"))
			if name == "" {
				name = str(kv.Key)
			}
			if pg := d.pg("", name, str(get(c, "desc"))); pg != nil {
				pg.Ranks = clip(str(get(c, "ranks")), 1024)
			}
		}
	}
	if st, ok := get(top, "pg_status").(*types.Dict); ok {
		for _, kv := range *st {
			s, ok := kv.Value.(*types.Dict)
			if !ok {
				continue
			}
			pg := d.pg(str(kv.Key), "", "")
			if pg == nil {
				continue
			}
			pg.LastEnqueued = intOr(get(s, "last_enqueued_collective"), -1)
			pg.LastStarted = intOr(get(s, "last_started_collective"), -1)
			pg.LastCompleted = intOr(get(s, "last_completed_collective"), -1)
			pg.status = true
		}
	}
}

// pg finds or adds the process group with this id or name (nil past
// maxPGs groups). pg_config knows groups by name, pg_status by id,
// entries both. The groups' slice is allocated once, so that pointers
// into it stay valid.
func (d *Dump) pg(id, name, desc string) *PGTrace {
	for i := range d.PGs {
		p := &d.PGs[i]
		if (id != "" && p.PG == id) || (name != "" && p.Name == name && (id == "" || p.PG == "")) {
			if p.PG == "" {
				p.PG = id
			}
			if p.Name == "" {
				p.Name = name
			}
			if p.Desc == "" {
				p.Desc = desc
			}
			return p
		}
	}
	if len(d.PGs) == maxPGs {
		return nil // a hostile dump's thousandth group is not summarised
	}
	if d.PGs == nil {
		d.PGs = make([]PGTrace, 0, maxPGs)
	}
	d.PGs = append(d.PGs, PGTrace{PG: id, Name: name, Desc: desc, LastEnqueued: -1, LastStarted: -1, LastCompleted: -1})
	return &d.PGs[len(d.PGs)-1]
}

func pgOf(e *types.Dict) (id, name, desc string) {
	id = str(get(e, "pg_id"))
	if t, ok := get(e, "process_group").(*types.Tuple); ok && t.Len() == 2 {
		name, desc = str(t.Get(0)), str(t.Get(1))
	}
	return id, name, desc
}

func entryOf(e *types.Dict) FREntry {
	f := FREntry{
		Op:        clip(str(get(e, "profiling_name")), 128),
		State:     clip(str(get(e, "state")), 32),
		TimeoutMs: intOr(get(e, "timeout_ms"), 0),
	}
	f.P2P, _ = get(e, "is_p2p").(bool)
	if f.P2P {
		f.Seq = intOr(get(e, "p2p_seq_id"), -1)
	} else {
		f.Seq = intOr(get(e, "collective_seq_id"), intOr(get(e, "seq_id"), -1))
	}
	f.InputSizes = sizes(get(e, "input_sizes"))
	f.OutputSizes = sizes(get(e, "output_sizes"))
	if l, ok := get(e, "input_dtypes").(*types.List); ok {
		for i := 0; i < l.Len() && i < 8; i++ {
			f.Dtypes = append(f.Dtypes, clip(str(l.Get(i)), 32))
		}
	}
	return f
}

// finishPG computes the counters a dump without pg_status lacks and picks
// the stalled entries.
func finishPG(p *PGTrace, es []FREntry) {
	if !p.status {
		for _, e := range es {
			if e.P2P || e.Seq < 0 {
				continue
			}
			p.LastEnqueued = max(p.LastEnqueued, e.Seq)
			if e.State == "started" || e.State == "completed" {
				p.LastStarted = max(p.LastStarted, e.Seq)
			}
			if e.State == "completed" {
				p.LastCompleted = max(p.LastCompleted, e.Seq)
			}
		}
	}
	for _, e := range es {
		if e.State == "completed" || (!e.P2P && e.Seq <= p.LastCompleted) {
			continue
		}
		if len(p.Stalled) == MaxStalled {
			break
		}
		p.Stalled = append(p.Stalled, e)
	}
}

// rankFile is a file of one rank: <stem><rank><suffix>.
type rankFile struct {
	name string
	rank int
}

// rankFiles lists the files <stem><rank><suffix> of prefix's directory
// (<dir>/<stem>) whose type keep accepts, by rank; links in the
// directory's own path are followed, the files' are not (a link's type
// is a link). At most maxDumpEntries directory entries are read.
func rankFiles(prefix, suffix string, keep func(fs.FileMode) bool) (string, []rankFile) {
	dir, stem := filepath.Split(prefix)
	if dir == "" {
		dir = "."
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	d, err := os.Open(dir)
	if err != nil {
		return dir, nil
	}
	defer d.Close()
	var out []rankFile
	for budget := maxDumpEntries; budget > 0; {
		des, err := d.ReadDir(min(budget, 1024))
		budget -= len(des)
		for _, de := range des {
			n := de.Name()
			if !keep(de.Type()) || !strings.HasPrefix(n, stem) || !strings.HasSuffix(n, suffix) {
				continue
			}
			r, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(n, stem), suffix))
			if err != nil || r < 0 {
				continue
			}
			out = append(out, rankFile{n, r})
		}
		if err != nil {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rank < out[j].rank })
	return dir, out
}

// ReadDumps reads the dumps whose names are prefix followed by a rank
// (TORCH_FR_DUMP_TEMP_FILE's <prefix><global rank>), at most MaxDumps of
// them, sorted by rank, until ctx is done. Links are not followed.
func ReadDumps(ctx context.Context, prefix string) []Dump {
	dir, cs := rankFiles(prefix, "", fs.FileMode.IsRegular)
	var out []Dump
	for i, c := range cs {
		path := filepath.Join(dir, c.name)
		if i == MaxDumps {
			out = append(out, Dump{File: path, Rank: c.rank, Error: fmt.Sprintf("not read: more than %d dumps", MaxDumps)})
			break
		}
		if ctx.Err() != nil {
			out = append(out, Dump{File: path, Rank: c.rank, Error: "not read: out of time"})
			continue
		}
		d, err := readDumpFile(path)
		d.File, d.Rank = path, c.rank
		if err != nil {
			d.Error = err.Error()
		}
		out = append(out, d)
	}
	return out
}

func readDumpFile(path string) (Dump, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return Dump{Rank: -1}, err
	}
	defer f.Close()
	return ReadDump(f)
}

// get is the value of a string key of a pickled dict; nil when absent.
func get(d *types.Dict, key string) any {
	for _, kv := range *d {
		if k, ok := kv.Key.(string); ok && k == key {
			return kv.Value
		}
	}
	return nil
}

func str(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case int, int64, *big.Int:
		return fmt.Sprint(t)
	}
	return ""
}

func intOr(v any, def int64) int64 {
	switch t := v.(type) {
	case int:
		return int64(t)
	case int64:
		return t
	case string: // pg_status in JSON dumps
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return n
		}
	}
	return def
}

// sizes reads a list of shapes, at most 8 shapes of 8 dimensions.
func sizes(v any) [][]int64 {
	l, ok := v.(*types.List)
	if !ok {
		return nil
	}
	var out [][]int64
	for i := 0; i < l.Len() && i < 8; i++ {
		s, ok := l.Get(i).(*types.List)
		if !ok {
			continue
		}
		shape := []int64{}
		for j := 0; j < s.Len() && j < 8; j++ {
			shape = append(shape, intOr(s.Get(j), -1))
		}
		out = append(out, shape)
	}
	return out
}

// pgLess orders pg ids numerically where they are numbers.
func pgLess(a, b string) bool {
	x, ea := strconv.Atoi(a)
	y, eb := strconv.Atoi(b)
	if ea == nil && eb == nil {
		return x < y
	}
	return a < b
}
