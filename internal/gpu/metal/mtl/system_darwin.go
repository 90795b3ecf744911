//go:build darwin

package mtl

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// System loads Metal.framework and returns the Runtime over it. Failing to load it is
// driver.ErrNoDriver (so `device: auto` falls back to the CPU).
func System() (Runtime, error) {
	lib, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("mtl: load Metal.framework: %w: %w", driver.ErrNoDriver, err)
	}
	// Command-line programs get no default device unless CoreGraphics is loaded as well.
	_, _ = purego.Dlopen("/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	fn, err := purego.Dlsym(lib, "MTLCreateSystemDefaultDevice")
	if err != nil || fn == 0 {
		return nil, fmt.Errorf("mtl: Metal.framework has no MTLCreateSystemDefaultDevice: %w", driver.ErrNoDriver)
	}
	var create func() objc.ID
	purego.RegisterFunc(&create, fn)
	s := &objcSender{}
	for i, sel := range Selectors {
		s.sels[i] = objc.RegisterName(sel.Name)
	}
	return NewObjCRuntime(s, func() ID { return ID(create()) }), nil
}

// objcSender sends through purego's objc_msgSend, converting the table's Go types to objc's.
type objcSender struct {
	sels [numSels]objc.SEL
}

func (s *objcSender) Class(name string) ID { return ID(objc.GetClass(name)) }

func (s *objcSender) Send(recv ID, sel Sel, args ...any) Ret {
	conv := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case ID:
			conv[i] = objc.ID(v)
		case Sel:
			conv[i] = s.sels[v]
		case *ID:
			conv[i] = (*objc.ID)(unsafe.Pointer(v))
		default:
			conv[i] = a
		}
	}
	id, sl := objc.ID(recv), s.sels[sel]
	switch Selectors[sel].Ret {
	case KindID:
		return Ret{ID: ID(objc.Send[objc.ID](id, sl, conv...))}
	case KindUInt:
		return Ret{U: objc.Send[uint64](id, sl, conv...)}
	case KindBool:
		return Ret{B: objc.Send[bool](id, sl, conv...)}
	case KindF64:
		return Ret{F: objc.Send[float64](id, sl, conv...)}
	case KindPtr:
		return Ret{P: objc.Send[unsafe.Pointer](id, sl, conv...)}
	}
	objc.Send[uintptr](id, sl, conv...)
	return Ret{}
}
