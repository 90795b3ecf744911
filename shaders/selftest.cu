// selftest.cu — the device layer's own kernels: small, exact workloads that internal/gpu's
// tests (and a device check) run to prove that compiling, argument passing, launching, shared
// memory and timing work end to end. No rendering code lives here.
//
// Thread mapping (every kernel): one thread per element, i = blockIdx.x * blockDim.x +
// threadIdx.x over a 1-D grid; threads with i >= n return at once.
//
// Buffers:
//   saxpy:     x [n] f32, y [n] f32 (read), out [n] f32 (written; may alias y)
//   affine:    v [p.n] f32, updated in place with v = v * p.scale + p.shift (a by-value struct)
//   fill_u32:  dst [n] u32, every element set to value
//   block_sum: x [n] f32; out [1] f32 accumulates the sum (atomicAdd per block, so the order
//              of additions, and the last bits of the result, vary from run to run); needs
//              blockDim.x * 4 bytes of dynamic shared memory and a power-of-two blockDim.x.

struct Affine {
    float scale;
    float shift;
    unsigned int n;
    unsigned int pad; // keeps the struct 16 bytes, as the host packs it
};

extern "C" __global__ void saxpy(unsigned int n, float a, const float* x, const float* y, float* out)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = a * x[i] + y[i];
}

extern "C" __global__ void affine(Affine p, float* v)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    v[i] = v[i] * p.scale + p.shift;
}

extern "C" __global__ void fill_u32(unsigned int* dst, unsigned int n, unsigned int value)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dst[i] = value;
}

extern "C" __global__ void block_sum(const float* x, unsigned int n, float* out)
{
    extern __shared__ float partial[];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    partial[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride) partial[t] += partial[t + stride];
        __syncthreads();
    }
    if (t == 0) atomicAdd(out, partial[0]);
}
