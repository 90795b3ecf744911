package train

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/io/ckpt"
)

// secRunID is the checkpoint section holding the run's identity.
const secRunID = "run/id"

// NewRunID names a run: its start time in UTC to the second, then six random hex digits, so
// that two runs started in the same second (or on two machines) still differ. The ID is
// written into config.yaml, every checkpoint, the PLY header and the first line of
// metrics.jsonl, so that files from two runs cannot be mistaken for each other; a resumed
// run keeps the ID of the run it continues.
func NewRunID(now time.Time) string {
	var b [3]byte
	// crypto/rand's Read never fails on the platforms Go supports (it crashes the program
	// instead); the error is part of the io.Reader signature only.
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// CheckpointRunID returns the run ID stored in a checkpoint, "" for a checkpoint written
// before runs had one.
func CheckpointRunID(path string) (string, error) {
	f, err := ckpt.ReadFile(path)
	if err != nil {
		return "", err
	}
	return runIDOf(f)
}

func runIDOf(f *ckpt.File) (string, error) {
	if _, ok := f.Kind(secRunID); !ok {
		return "", nil
	}
	b, err := f.Bytes(secRunID)
	if err != nil {
		return "", fmt.Errorf("section %s: %w", secRunID, err)
	}
	return string(b), nil
}

// RunID is the identity of the run: Options.RunID, the resumed checkpoint's, or a new one.
func (t *Trainer) RunID() string { return t.runID }
