"""PyCUDA's Memcpy2D, Memcpy3D and Memcpy3DPeer (kiln.driver's): a copy of rows, or of slices
of rows, between pitched host and device memory (of two devices, for Memcpy3DPeer), described
by attributes and then called.

    copy = drv.Memcpy2D()
    copy.set_src_host(host)            # a numpy array or another buffer
    copy.set_dst_device(dev)           # mem_alloc_pitch's memory, say
    copy.src_pitch, copy.dst_pitch = host.strides[0], pitch
    copy.width_in_bytes, copy.height = host.strides[0], host.shape[0]
    copy()                             # or copy(stream), queued on it

Each side is checked before anything is copied: a host side's rows must lie in its buffer, a
device side's in one allocation, an array side's in the array's rows and slices, and a row may
not be wider than a pitch (kiln_memcpy_3d). An array side goes by the array's own rows: its
pitch and height are not read.
"""
from . import _kiln

_HOST, _DEVICE, _ARRAY, _UNIFIED = 1, 2, 3, 4


class Memcpy2D:
    """height rows of width_in_bytes from the source to the destination."""

    _what = "Memcpy2D"

    def __init__(self):
        self.src_x_in_bytes = self.src_y = self.src_pitch = 0
        self.dst_x_in_bytes = self.dst_y = self.dst_pitch = 0
        self.width_in_bytes = self.height = 0
        self._src = self._dst = None  # (kind, memory): the memory is kept until the next set

    def set_src_host(self, buffer):
        """The source: host memory, a numpy array (strided too: a window of a larger one) or
        another object with the buffer protocol."""
        self._src = (_HOST, buffer)

    def set_src_device(self, devptr):
        """The source: a device address (an int, a DeviceAllocation, a DeviceArray's .gpudata)."""
        self._src = (_DEVICE, _address(devptr))

    def set_src_unified(self, buffer):
        """The source: a buffer the driver may find in host or device memory (managed memory)."""
        self._src = (_UNIFIED, buffer)

    def set_src_array(self, array):
        """The source: a kiln.driver.Array (src_x_in_bytes in whole elements)."""
        self._src = (_ARRAY, array)

    def set_dst_host(self, buffer):
        """The destination: writable host memory (a numpy array or another buffer)."""
        self._dst = (_HOST, buffer)

    def set_dst_device(self, devptr):
        """The destination: a device address (an int, a DeviceAllocation, .gpudata)."""
        self._dst = (_DEVICE, _address(devptr))

    def set_dst_unified(self, buffer):
        """The destination: a buffer in host or device memory (managed memory)."""
        self._dst = (_UNIFIED, buffer)

    def set_dst_array(self, array):
        """The destination: a kiln.driver.Array (dst_x_in_bytes in whole elements)."""
        self._dst = (_ARRAY, array)

    def _side(self, which, z, height):
        memory = self._src if which == "src" else self._dst
        if memory is None:
            raise ValueError(f"{self._what}: no {'source' if which == 'src' else 'destination'} "
                             f"was set (set_{which}_host, set_{which}_device, "
                             f"set_{which}_unified or set_{which}_array)")
        return (memory[0], memory[1], getattr(self, which + "_x_in_bytes"),
                getattr(self, which + "_y"), z, getattr(self, which + "_pitch"), height)

    def _sides(self):
        return self._side("src", 0, 0), self._side("dst", 0, 0), 1

    def __call__(self, stream_or_aligned=True, aligned=None):
        """The copy, waited for; or, given a stream (a Stream, not an int), queued on it
        (PyCUDA's two forms). aligned=False tolerates device pitches that mem_alloc_pitch did
        not give."""
        src, dst, depth = self._sides()
        # An int is PyCUDA's aligned flag (its overloads take a Stream object alone as a stream).
        if isinstance(stream_or_aligned, int) or stream_or_aligned is None:
            unaligned = not (stream_or_aligned if aligned is None else aligned)
            _kiln._memcpy_3d(src, dst, self.width_in_bytes, self.height, depth, unaligned,
                             False, None)
        else:
            _kiln._memcpy_3d(src, dst, self.width_in_bytes, self.height, depth, False, True,
                             stream_or_aligned)


class Memcpy3D(Memcpy2D):
    """depth slices of height rows of width_in_bytes; each side's slices are its height rows
    apart (src_height, dst_height: 0 will do when depth is 1)."""

    _what = "Memcpy3D"

    def __init__(self):
        super().__init__()
        self.src_z = self.src_height = 0
        self.dst_z = self.dst_height = 0
        self.depth = 0
        # PyCUDA's, CUDA_MEMCPY3D's level of detail: reserved, 0 as the driver requires.
        self.src_lod = self.dst_lod = 0

    def _sides(self):
        if self.src_lod or self.dst_lod:
            raise ValueError(f"{self._what}: src_lod and dst_lod must be 0, as the driver "
                             f"requires, not {self.src_lod} and {self.dst_lod}")
        return (self._side("src", self.src_z, self.src_height),
                self._side("dst", self.dst_z, self.dst_height), self.depth)

    def __call__(self, stream=None):
        """The copy, waited for; or, given a stream, queued on it."""
        src, dst, depth = self._sides()
        # Unaligned: a blocking copy of one slice goes through cuMemcpy2D, whose aligned form
        # may refuse device pitches that cuMemcpy3D takes.
        _kiln._memcpy_3d(src, dst, self.width_in_bytes, self.height, depth, True,
                         stream is not None, stream)


class Memcpy3DPeer(Memcpy3D):
    """Memcpy3D between devices: set_src_context and set_dst_context name the context (a
    Context, or the Device it is of) whose device each side's device memory is on; a side left
    unset is the current context's."""

    _what = "Memcpy3DPeer"

    def __init__(self):
        super().__init__()
        self._src_context = self._dst_context = None

    def set_src_context(self, ctx):
        """The context of the source's device memory."""
        self._src_context = ctx

    def set_dst_context(self, ctx):
        """The context of the destination's device memory."""
        self._dst_context = ctx

    def __call__(self, stream=None):
        """The copy, waited for; or, given a stream, queued on it."""
        src, dst, depth = self._sides()
        _kiln._memcpy_3d(src, dst, self.width_in_bytes, self.height, depth, True,
                         stream is not None, stream, self._src_context, self._dst_context)


def _address(devptr):
    """A device address as _memcpy_3d takes it: a DeviceArray's is its pointer; an int, a
    DeviceAllocation or a PointerHolderBase pass as they are."""
    if isinstance(devptr, _kiln.DeviceArray):
        return devptr.ptr
    return devptr

