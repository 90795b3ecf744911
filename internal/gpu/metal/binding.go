package metal

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// binding says how one launch argument is handed to a Metal compute encoder: a buffer with an
// offset (setBuffer:offset:atIndex:) or inline bytes (setBytes:length:atIndex:).
type binding struct {
	Index  int           // [[buffer(Index)]]
	Buffer driver.Buffer // nil for inline bytes
	Offset int
	Bytes  []byte
}

// maxInlineBytes is Metal's limit for setBytes (4 KiB); larger data must live in a buffer.
const maxInlineBytes = 4096

// maxBufferIndex: a compute function has buffer indices 0..30.
const maxBufferIndex = 30

// planBindings maps launch arguments onto buffer indices (argument i → [[buffer(i)]]).
func planBindings(args []driver.Arg) ([]binding, error) {
	if len(args) > maxBufferIndex+1 {
		return nil, fmt.Errorf("metal: %d arguments, Metal binds at most %d", len(args), maxBufferIndex+1)
	}
	// Pack with a dummy address resolver: only the scalar bytes are used from it.
	packed, err := driver.Pack(args, func(driver.Buffer, int) (uint64, error) { return 0, nil })
	if err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	out := make([]binding, len(args))
	for i, a := range args {
		out[i].Index = i
		if a.Kind() == driver.ArgBuffer {
			out[i].Buffer, out[i].Offset = a.Buffer()
			continue
		}
		b := packed.Bytes(i)
		if len(b) > maxInlineBytes {
			return nil, fmt.Errorf("metal: argument %d: %d bytes inline, Metal allows %d (use a buffer)", i, len(b), maxInlineBytes)
		}
		out[i].Bytes = append([]byte(nil), b...)
	}
	return out, nil
}
