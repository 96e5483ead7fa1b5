package nccllog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/internal/environ"
)

// TorchFile is where torchrun will write the first failing rank's
// exception for a run of cmd with environment env ("" for nowhere): the
// user's TORCHELASTIC_ERROR_FILE when set (its directory's links resolved,
// PinDir: torchrun writes it whatever starts torchrun), else, when cmd is
// torchrun, error.json in a new temporary directory, with the variable that
// asks for it (nil otherwise) and a cleanup that removes the directory.
// otherUser says that CMD runs as another user, who must be able to create
// the file.
func TorchFile(env []string, cmd cmdkind.Command, otherUser bool) (path string, ask *environ.Var, cleanup func()) {
	cleanup = func() {}
	if v, set := environ.Lookup(env, "TORCHELASTIC_ERROR_FILE"); set {
		if v == "" {
			return "", nil, cleanup
		}
		return PinDir(v), nil, cleanup
	}
	if !cmd.Torchrun() {
		return "", nil, cleanup
	}
	dir, err := os.MkdirTemp("", "ncclrun-torchelastic-")
	if err != nil {
		return "", nil, cleanup
	}
	if otherUser {
		_ = os.Chmod(dir, 0o1777)
	}
	path = filepath.Join(dir, "error.json")
	return path, &environ.Var{Name: "TORCHELASTIC_ERROR_FILE", Value: path,
		Reason: "torchrun writes the first failing rank's exception there for ncclrun's report"}, func() { os.RemoveAll(dir) }
}

// TorchrunError is the first failing rank's exception from torchrun's
// error file (ExitReads.Torch): {"message": {"message": "...", "extraInfo":
// {"py_callstack": ..., "timestamp": ...}}, "errorCode": N}, or a message
// that is a plain string. Its JSON is run's report's torchrun_error.
type TorchrunError struct {
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	ErrorCode *int   `json:"error_code,omitempty"`
}

// ParseTorchrunError parses torchrun's error file; nil when it cannot be
// understood.
func ParseTorchrunError(data []byte) *TorchrunError {
	var raw struct {
		Message   json.RawMessage `json:"message"`
		ErrorCode *int            `json:"errorCode"`
	}
	if json.Unmarshal(data, &raw) != nil || len(raw.Message) == 0 {
		return nil
	}
	te := &TorchrunError{ErrorCode: raw.ErrorCode}
	var str string
	if json.Unmarshal(raw.Message, &str) == nil {
		te.Message = str
		return te
	}
	var obj struct {
		Message   string `json:"message"`
		ExtraInfo struct {
			PyCallstack string          `json:"py_callstack"`
			Timestamp   json.RawMessage `json:"timestamp"`
		} `json:"extraInfo"`
	}
	if json.Unmarshal(raw.Message, &obj) != nil {
		return nil
	}
	te.Message, te.Traceback = obj.Message, obj.ExtraInfo.PyCallstack
	var ts string
	if json.Unmarshal(obj.ExtraInfo.Timestamp, &ts) == nil {
		te.Timestamp = ts
	} else if len(obj.ExtraInfo.Timestamp) > 0 {
		te.Timestamp = string(obj.ExtraInfo.Timestamp)
	}
	return te
}

// FirstFailing is te, or exception, the program's exception that the
// caller saw first in the output ("" for none), when te names another
// failure: torch 1.13 picks the rank by whole-second timestamps, lowest
// local rank on a tie, and so can name a sibling's lost connection, the
// knock-on of the exception, instead of the exception. A nil te stays nil.
func (te *TorchrunError) FirstFailing(exception string) *TorchrunError {
	if te == nil {
		return nil
	}
	exc := strings.TrimSpace(exception)
	msg := strings.TrimSpace(te.Message)
	if exc == "" || msg != "" && (strings.Contains(exc, msg) || strings.Contains(msg, exc)) {
		return te
	}
	return &TorchrunError{Message: exc, ErrorCode: te.ErrorCode}
}
