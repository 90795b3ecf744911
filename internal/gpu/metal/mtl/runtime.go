package mtl

// Runtime is the part of Metal that the backend uses. Every object a method returns is owned
// by the caller, who releases it (the Objective-C implementation retains what Metal hands back
// autoreleased). Calls must come from one OS thread, inside an autorelease pool.
type Runtime interface {
	// DefaultDevice is MTLCreateSystemDefaultDevice.
	DefaultDevice() (Device, error)
	// PushPool opens an autorelease pool on the calling thread.
	PushPool() Pool
}

// Pool is an open NSAutoreleasePool.
type Pool interface{ Drain() }

// Object is any Metal object: it holds a reference until released.
type Object interface{ Release() }

// Device is an MTLDevice.
type Device interface {
	Object
	Name() string
	SupportsFamily(GPUFamily) bool
	RecommendedMaxWorkingSetSize() uint64
	CurrentAllocatedSize() uint64
	MaxThreadgroupMemoryLength() uint64
	NewCommandQueue() (CommandQueue, error)
	NewBuffer(length uint64, opts ResourceOptions) (Buffer, error)
	// NewLibraryWithSource compiles MSL; a failure is an *NSError whose Description is the log.
	NewLibraryWithSource(source string, opts CompileOptions) (Library, error)
	NewComputePipelineState(fn Function) (ComputePipelineState, error)
}

// Buffer is an MTLBuffer in shared storage.
type Buffer interface {
	Object
	Length() uint64
	// Contents is the buffer's memory as the CPU sees it (valid until Release).
	Contents() []byte
}

// Library is an MTLLibrary.
type Library interface {
	Object
	NewFunction(name string) (Function, error)
}

// Function is an MTLFunction.
type Function interface{ Object }

// ComputePipelineState is an MTLComputePipelineState with the limits the backend checks.
type ComputePipelineState interface {
	Object
	MaxTotalThreadsPerThreadgroup() int
	ThreadExecutionWidth() int
	StaticThreadgroupMemoryLength() int
}

// CommandQueue is an MTLCommandQueue.
type CommandQueue interface {
	Object
	CommandBuffer() (CommandBuffer, error)
}

// CommandBuffer is an MTLCommandBuffer.
type CommandBuffer interface {
	Object
	ComputeCommandEncoder() (ComputeCommandEncoder, error)
	BlitCommandEncoder() (BlitCommandEncoder, error)
	Commit()
	WaitUntilCompleted()
	Status() CommandBufferStatus
	// Error is the failure of a buffer whose Status is StatusError (an *NSError), else nil.
	Error() error
	// GPUStartTime and GPUEndTime are in seconds (CFTimeInterval), valid once completed.
	GPUStartTime() float64
	GPUEndTime() float64
}

// ComputeCommandEncoder is an MTLComputeCommandEncoder.
type ComputeCommandEncoder interface {
	Object
	SetComputePipelineState(ComputePipelineState)
	SetBuffer(b Buffer, offset uint64, index int)
	// SetBytes copies b (at most 4 KB) into the command stream.
	SetBytes(b []byte, index int)
	SetThreadgroupMemoryLength(length uint64, index int)
	DispatchThreadgroups(grid, threadsPerGroup Size)
	EndEncoding()
}

// BlitCommandEncoder is an MTLBlitCommandEncoder.
type BlitCommandEncoder interface {
	Object
	FillBuffer(b Buffer, r Range, value byte)
	CopyFromBuffer(src Buffer, srcOffset uint64, dst Buffer, dstOffset, size uint64)
	EndEncoding()
}
