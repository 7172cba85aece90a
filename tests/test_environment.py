"""What kiln does with no driver: import and compile work, the first GPU use says why not."""
import subprocess
import sys

from helpers import HAVE_GPU, run_python


def test_no_driver_is_no_device_error_not_import_error():
    out = run_python("""
        import numpy as np
        import kiln
        mod = kiln.SourceModule("__global__ void k(float *x) { x[0] = 1; }", arch="sm_90")
        f = mod.get_function("k")
        try:
            f(kiln.Out(np.zeros(1, np.float32)), block=1)
        except kiln.NoDeviceError as e:
            assert isinstance(e, kiln.CudaError) and e.code is None and e.name is None
            print("NoDeviceError:", e)
        try:
            kiln.Device.count()
        except kiln.NoDeviceError:
            print("count raised too")
    """, {"KILN_CUDA_PATH": "/nonexistent/libcuda.so.1"})
    assert out.returncode == 0, out.stderr
    assert "NoDeviceError: no CUDA driver could be loaded" in out.stdout
    assert "compiling does not" in out.stdout
    assert "count raised too" in out.stdout


def test_missing_nvrtc_is_a_kiln_error():
    out = run_python("""
        import kiln
        try:
            kiln.SourceModule("__global__ void k() {}", arch="sm_90")
        except kiln.Error as e:
            print(type(e).__name__, e)
    """, {"KILN_NVRTC_PATH": "/nonexistent/libnvrtc.so"})
    assert "Error NVRTC could not be loaded (tried KILN_NVRTC_PATH=/nonexistent" in out.stdout, \
        out.stderr


def test_demo_runs():
    out = subprocess.run([sys.executable, "-m", "kiln", "demo"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "compiled multiply_them with NVRTC" in out.stdout
    if HAVE_GPU:
        assert "dest == a * b for all 400 elements" in out.stdout
    else:
        assert "no launch: launching needs a CUDA device" in out.stdout
