package metal

import (
	"errors"
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mtl"
)

type module struct {
	dev     *Device
	lib     mtl.Library // owned by the device's cache
	info    driver.ModuleInfo
	kernels map[string]*kernel
	closed  bool
}

type kernel struct {
	mod       *module
	name      string
	pipe      mtl.ComputePipelineState
	maxThread int // maxTotalThreadsPerThreadgroup of this pipeline
	static    int // static threadgroup memory, bytes
}

func (k *kernel) Name() string { return k.name }

func (m *module) Info() driver.ModuleInfo { return m.info }

// Compile turns src into MSL (see MSL), compiles it with MSL 3.0 and safe math, and keeps the
// library for later compiles of the same text.
func (d *Device) Compile(src driver.Source) (driver.Module, error) {
	if d.opts.NoCompiler {
		return nil, fmt.Errorf("metal: compile %s: %w (Metal ships no prebuilt kernels)", src.Name, driver.ErrNoCompiler)
	}
	text, err := MSL(src)
	if err != nil {
		return nil, err
	}
	key := driver.CacheKey("metal-msl", languageVersion.String(), text)
	var m *module
	err = d.do(func() error {
		origin := originMemory
		lib := d.libs[key]
		if lib == nil {
			origin = driver.OriginCompiled
			lib, err = d.dev.NewLibraryWithSource(text, mtl.CompileOptions{LanguageVersion: languageVersion})
			if err != nil {
				return d.compileError(src, err)
			}
			d.libs[key] = lib
		}
		m = &module{dev: d, lib: lib, kernels: map[string]*kernel{}, info: driver.ModuleInfo{
			Source: src.Name, Hash: src.Hash(), Target: d.info.Arch, Format: "msl", Origin: origin,
		}}
		d.modules[m] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (d *Device) compileError(src driver.Source, err error) error {
	if errors.Is(err, driver.ErrNoCompiler) {
		return fmt.Errorf("metal: compile %s: %w", src.Name, err)
	}
	log := err.Error()
	var ns *mtl.NSError
	if errors.As(err, &ns) {
		log = ns.Description
	}
	return &driver.CompileError{Backend: "metal", Source: src.Name, Target: d.info.Arch, Log: log,
		Diagnostics: driver.ParseDiagnostics(log), Err: errors.New("newLibraryWithSource:options:error: failed")}
}

// Kernel creates (once) the compute pipeline of a function and checks what the launches will
// rely on: the SIMD width the warp helpers assume and static threadgroup memory within the
// device's limit.
func (m *module) Kernel(name string) (driver.Kernel, error) {
	d := m.dev
	var k *kernel
	err := d.do(func() error {
		if m.closed {
			return fmt.Errorf("metal: kernel %s: module closed: %w", name, driver.ErrClosed)
		}
		if k = m.kernels[name]; k != nil {
			return nil
		}
		fn, err := m.lib.NewFunction(name)
		if err != nil {
			return fmt.Errorf("metal: kernel %s of %s: %w", name, m.info.Source, err)
		}
		defer fn.Release()
		p, err := d.dev.NewComputePipelineState(fn)
		if err != nil {
			return fmt.Errorf("metal: compute pipeline for kernel %s: %w", name, err)
		}
		nk := &kernel{mod: m, name: name, pipe: p, maxThread: p.MaxTotalThreadsPerThreadgroup(), static: p.StaticThreadgroupMemoryLength()}
		if w := p.ThreadExecutionWidth(); w != SIMDWidth {
			p.Release()
			return fmt.Errorf("metal: kernel %s: SIMD width %d, the kernels' warp helpers assume %d", name, w, SIMDWidth)
		}
		if nk.static > d.tgMax {
			p.Release()
			return fmt.Errorf("metal: kernel %s: %d bytes of static threadgroup memory, the device allows %d", name, nk.static, d.tgMax)
		}
		m.kernels[name] = nk
		k = nk
		return nil
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// Close releases the module's pipelines (a command buffer that still uses one keeps it).
func (m *module) Close() error {
	return m.dev.do(func() error {
		m.release()
		return nil
	})
}

func (m *module) release() {
	if m.closed {
		return
	}
	m.closed = true
	for _, k := range m.kernels {
		k.pipe.Release()
	}
	delete(m.dev.modules, m)
}

// Launch encodes a dispatch into the open command buffer after checking Metal's limits; it runs
// when the buffer is committed. Argument i binds to [[buffer(i)]]; dynamic shared memory is
// [[threadgroup(0)]].
func (d *Device) Launch(k driver.Kernel, grid, block driver.Dim3, shared int, args ...driver.Arg) error {
	mk, ok := k.(*kernel)
	if !ok || mk == nil || mk.mod.dev != d {
		return fmt.Errorf("metal: launch: %w", driver.ErrForeignHandle)
	}
	grid, block = grid.Norm(), block.Norm()
	if n := uint64(block[0]) * uint64(block[1]) * uint64(block[2]); n > uint64(mk.maxThread) {
		return fmt.Errorf("metal: launch %s: %d threads per threadgroup, the pipeline allows %d (maxTotalThreadsPerThreadgroup)", mk.name, n, mk.maxThread)
	}
	if shared < 0 {
		return fmt.Errorf("metal: launch %s: negative threadgroup memory %d", mk.name, shared)
	}
	// setThreadgroupMemoryLength takes multiples of 16.
	dyn := (shared + 15) / 16 * 16
	if tg := mk.static + dyn; tg > d.tgMax {
		return fmt.Errorf("metal: launch %s: %d bytes of threadgroup memory (%d static + %d dynamic), the device allows %d", mk.name, tg, mk.static, dyn, d.tgMax)
	}
	binds, err := planBindings(args)
	if err != nil {
		return fmt.Errorf("metal: launch %s: %w", mk.name, err)
	}
	return d.do(func() error {
		if mk.mod.closed {
			return fmt.Errorf("metal: launch %s: module closed: %w", mk.name, driver.ErrClosed)
		}
		bufs := make([]*buffer, len(binds))
		for i, b := range binds {
			if b.Buffer == nil {
				continue
			}
			mb, err := d.own(b.Buffer)
			if err != nil {
				return fmt.Errorf("metal: launch %s: argument %d: %w", mk.name, b.Index, err)
			}
			if b.Offset < 0 || b.Offset > mb.size {
				return fmt.Errorf("metal: launch %s: argument %d: offset %d of a %d-byte buffer", mk.name, b.Index, b.Offset, mb.size)
			}
			bufs[i] = mb
		}
		enc, err := d.computeEncoder()
		if err != nil {
			return err
		}
		enc.SetComputePipelineState(mk.pipe)
		for i, b := range binds {
			switch {
			case b.Buffer == nil:
				enc.SetBytes(b.Bytes, b.Index)
			case bufs[i].mb == nil:
				// A zero-length buffer: nothing to bind, and the kernel reads none of it.
			default:
				enc.SetBuffer(bufs[i].mb, uint64(b.Offset), b.Index)
			}
		}
		if dyn > 0 {
			enc.SetThreadgroupMemoryLength(uint64(dyn), 0)
		}
		enc.DispatchThreadgroups(mtl.Size{Width: uint64(grid[0]), Height: uint64(grid[1]), Depth: uint64(grid[2])},
			mtl.Size{Width: uint64(block[0]), Height: uint64(block[1]), Depth: uint64(block[2])})
		d.cur.addKernel(mk.name)
		return d.debugWait()
	})
}

// addKernel notes a kernel in the command buffer, once, for error messages.
func (f *flight) addKernel(name string) {
	for _, n := range f.kernels {
		if n == name {
			return
		}
	}
	f.kernels = append(f.kernels, name)
}
