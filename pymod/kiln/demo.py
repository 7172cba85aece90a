"""The seed's multiply_them, end to end: `python -m kiln demo` (or `make demo`)."""
import numpy as np

import kiln

SOURCE = """
__global__ void multiply_them(float *dest, const float *a, const float *b, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dest[i] = a[i] * b[i]; }
"""


def main():
    try:
        ndev = kiln.Device.count()
        why = "the driver found no CUDA device" if ndev == 0 else ""
    except kiln.NoDeviceError as e:
        ndev, why = 0, str(e)
    mod = kiln.SourceModule(SOURCE, arch=None if ndev else "sm_90")
    f = mod.get_function("multiply_them")
    print(f"compiled multiply_them with NVRTC for {mod.arch}: "
          f"{len(mod.ptx)} bytes of PTX, {len(mod.cubin or b'')} bytes of CUBIN")
    print(f"kernel multiply_them, entry {f.name}: ({', '.join(f.signature)})")
    if ndev == 0:
        print(f"no launch: launching needs a CUDA device ({why})")
        return 0
    a = np.random.randn(400).astype(np.float32)
    b = np.random.randn(400).astype(np.float32)
    dest = np.zeros_like(a)
    seconds = f(kiln.Out(dest), kiln.In(a), kiln.In(b), 400, block=(400, 1, 1), grid=(1, 1),
                time_kernel=True)
    assert np.array_equal(dest, a * b), "dest != a * b"
    print(f"launched on {kiln.Device(0).name()}: dest == a * b for all 400 elements "
          f"(kernel time {seconds * 1e6:.1f} us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
