"""The driver's enumerations under PyCUDA's names (kiln.driver re-exports them): each member
is the value cuda.h gives the constant, with its prefix dropped (device_attribute.WARP_SIZE is
CU_DEVICE_ATTRIBUTE_WARP_SIZE). tests/test_driver.py checks every value against cuda.h."""
import enum


class _NamesType(type(enum.IntEnum)):
    """PyCUDA's enumerations are ints (Boost.Python's), so calling one with no value gives
    its 0, as int() does: `jit_option()`."""

    def __call__(cls, *args, **kwargs):
        return super().__call__(*(args or (0,)), **kwargs)


class _Names(enum.IntEnum, metaclass=_NamesType):
    """An int that prints as its name, as PyCUDA's enumerations do: `{att}: {value}` over
    Device.get_attributes() reads MAX_THREADS_PER_BLOCK: 1024. A value no member has is
    taken too, as PyCUDA's are ints of any value (a driver newer than kiln's list has more);
    it prints as its number."""

    @classmethod
    def _missing_(cls, value):
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        member = int.__new__(cls, value)
        member._name_ = None
        member._value_ = value
        return member

    def __repr__(self):
        if self._name_ is None:
            return f"<{type(self).__name__}: {self._value_}>"
        return super().__repr__()

    def __str__(self):
        return str(self._value_) if self._name_ is None else self._name_

    def __format__(self, spec):
        return format(str(self), spec) if not spec or spec[-1] not in "bcdoxXn" else \
            format(int(self), spec)


class ctx_flags(_Names):
    """Flags of a context. Device.make_context takes them; kiln makes no context, and the
    primary context's flags are the driver's."""

    SCHED_AUTO = 0
    SCHED_SPIN = 1
    SCHED_YIELD = 2
    SCHED_BLOCKING_SYNC = 4
    BLOCKING_SYNC = 4
    SCHED_MASK = 7
    MAP_HOST = 8
    LMEM_RESIZE_TO_MAX = 16
    COREDUMP_ENABLE = 32
    USER_COREDUMP_ENABLE = 64
    SYNC_MEMOPS = 128
    FLAGS_MASK = 255


class event_flags(_Names):
    """Flags of an Event."""

    DEFAULT = 0
    BLOCKING_SYNC = 1
    DISABLE_TIMING = 2
    INTERPROCESS = 4


class device_attribute(_Names):
    """What Device.get_attribute reads."""

    MAX_THREADS_PER_BLOCK = 1
    MAX_BLOCK_DIM_X = 2
    MAX_BLOCK_DIM_Y = 3
    MAX_BLOCK_DIM_Z = 4
    MAX_GRID_DIM_X = 5
    MAX_GRID_DIM_Y = 6
    MAX_GRID_DIM_Z = 7
    MAX_SHARED_MEMORY_PER_BLOCK = 8
    SHARED_MEMORY_PER_BLOCK = 8
    TOTAL_CONSTANT_MEMORY = 9
    WARP_SIZE = 10
    MAX_PITCH = 11
    MAX_REGISTERS_PER_BLOCK = 12
    REGISTERS_PER_BLOCK = 12
    CLOCK_RATE = 13
    TEXTURE_ALIGNMENT = 14
    GPU_OVERLAP = 15
    MULTIPROCESSOR_COUNT = 16
    KERNEL_EXEC_TIMEOUT = 17
    INTEGRATED = 18
    CAN_MAP_HOST_MEMORY = 19
    COMPUTE_MODE = 20
    MAXIMUM_TEXTURE1D_WIDTH = 21
    MAXIMUM_TEXTURE2D_WIDTH = 22
    MAXIMUM_TEXTURE2D_HEIGHT = 23
    MAXIMUM_TEXTURE3D_WIDTH = 24
    MAXIMUM_TEXTURE3D_HEIGHT = 25
    MAXIMUM_TEXTURE3D_DEPTH = 26
    MAXIMUM_TEXTURE2D_LAYERED_WIDTH = 27
    MAXIMUM_TEXTURE2D_LAYERED_HEIGHT = 28
    MAXIMUM_TEXTURE2D_LAYERED_LAYERS = 29
    MAXIMUM_TEXTURE2D_ARRAY_WIDTH = 27
    MAXIMUM_TEXTURE2D_ARRAY_HEIGHT = 28
    MAXIMUM_TEXTURE2D_ARRAY_NUMSLICES = 29
    SURFACE_ALIGNMENT = 30
    CONCURRENT_KERNELS = 31
    ECC_ENABLED = 32
    PCI_BUS_ID = 33
    PCI_DEVICE_ID = 34
    TCC_DRIVER = 35
    MEMORY_CLOCK_RATE = 36
    GLOBAL_MEMORY_BUS_WIDTH = 37
    L2_CACHE_SIZE = 38
    MAX_THREADS_PER_MULTIPROCESSOR = 39
    ASYNC_ENGINE_COUNT = 40
    UNIFIED_ADDRESSING = 41
    MAXIMUM_TEXTURE1D_LAYERED_WIDTH = 42
    MAXIMUM_TEXTURE1D_LAYERED_LAYERS = 43
    CAN_TEX2D_GATHER = 44
    MAXIMUM_TEXTURE2D_GATHER_WIDTH = 45
    MAXIMUM_TEXTURE2D_GATHER_HEIGHT = 46
    MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE = 47
    MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE = 48
    MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE = 49
    PCI_DOMAIN_ID = 50
    TEXTURE_PITCH_ALIGNMENT = 51
    MAXIMUM_TEXTURECUBEMAP_WIDTH = 52
    MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH = 53
    MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS = 54
    MAXIMUM_SURFACE1D_WIDTH = 55
    MAXIMUM_SURFACE2D_WIDTH = 56
    MAXIMUM_SURFACE2D_HEIGHT = 57
    MAXIMUM_SURFACE3D_WIDTH = 58
    MAXIMUM_SURFACE3D_HEIGHT = 59
    MAXIMUM_SURFACE3D_DEPTH = 60
    MAXIMUM_SURFACE1D_LAYERED_WIDTH = 61
    MAXIMUM_SURFACE1D_LAYERED_LAYERS = 62
    MAXIMUM_SURFACE2D_LAYERED_WIDTH = 63
    MAXIMUM_SURFACE2D_LAYERED_HEIGHT = 64
    MAXIMUM_SURFACE2D_LAYERED_LAYERS = 65
    MAXIMUM_SURFACECUBEMAP_WIDTH = 66
    MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH = 67
    MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS = 68
    MAXIMUM_TEXTURE1D_LINEAR_WIDTH = 69
    MAXIMUM_TEXTURE2D_LINEAR_WIDTH = 70
    MAXIMUM_TEXTURE2D_LINEAR_HEIGHT = 71
    MAXIMUM_TEXTURE2D_LINEAR_PITCH = 72
    MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH = 73
    MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT = 74
    COMPUTE_CAPABILITY_MAJOR = 75
    COMPUTE_CAPABILITY_MINOR = 76
    MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH = 77
    STREAM_PRIORITIES_SUPPORTED = 78
    GLOBAL_L1_CACHE_SUPPORTED = 79
    LOCAL_L1_CACHE_SUPPORTED = 80
    MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
    MAX_REGISTERS_PER_MULTIPROCESSOR = 82
    MANAGED_MEMORY = 83
    MULTI_GPU_BOARD = 84
    MULTI_GPU_BOARD_GROUP_ID = 85
    HOST_NATIVE_ATOMIC_SUPPORTED = 86
    SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO = 87
    PAGEABLE_MEMORY_ACCESS = 88
    CONCURRENT_MANAGED_ACCESS = 89
    COMPUTE_PREEMPTION_SUPPORTED = 90
    CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91
    CAN_USE_STREAM_MEM_OPS_V1 = 92
    CAN_USE_64_BIT_STREAM_MEM_OPS_V1 = 93
    CAN_USE_STREAM_WAIT_VALUE_NOR_V1 = 94
    COOPERATIVE_LAUNCH = 95
    COOPERATIVE_MULTI_DEVICE_LAUNCH = 96
    MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
    CAN_FLUSH_REMOTE_WRITES = 98
    HOST_REGISTER_SUPPORTED = 99
    PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES = 100
    DIRECT_MANAGED_MEM_ACCESS_FROM_HOST = 101
    VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED = 102
    VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102
    HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103
    HANDLE_TYPE_WIN32_HANDLE_SUPPORTED = 104
    HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED = 105
    MAX_BLOCKS_PER_MULTIPROCESSOR = 106
    GENERIC_COMPRESSION_SUPPORTED = 107
    MAX_PERSISTING_L2_CACHE_SIZE = 108
    MAX_ACCESS_POLICY_WINDOW_SIZE = 109
    GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110
    RESERVED_SHARED_MEMORY_PER_BLOCK = 111
    SPARSE_CUDA_ARRAY_SUPPORTED = 112
    READ_ONLY_HOST_REGISTER_SUPPORTED = 113
    TIMELINE_SEMAPHORE_INTEROP_SUPPORTED = 114
    MEMORY_POOLS_SUPPORTED = 115
    GPU_DIRECT_RDMA_SUPPORTED = 116
    GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS = 117
    GPU_DIRECT_RDMA_WRITES_ORDERING = 118
    MEMPOOL_SUPPORTED_HANDLE_TYPES = 119
    CLUSTER_LAUNCH = 120
    DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED = 121
    CAN_USE_64_BIT_STREAM_MEM_OPS = 122
    CAN_USE_STREAM_WAIT_VALUE_NOR = 123
    DMA_BUF_SUPPORTED = 124
    IPC_EVENT_SUPPORTED = 125
    MEM_SYNC_DOMAIN_COUNT = 126
    TENSOR_MAP_ACCESS_SUPPORTED = 127
    HANDLE_TYPE_FABRIC_SUPPORTED = 128
    UNIFIED_FUNCTION_POINTERS = 129
    NUMA_CONFIG = 130
    NUMA_ID = 131
    MULTICAST_SUPPORTED = 132
    MPS_ENABLED = 133
    HOST_NUMA_ID = 134
    D3D12_CIG_SUPPORTED = 135
    MEM_DECOMPRESS_ALGORITHM_MASK = 136
    MEM_DECOMPRESS_MAXIMUM_LENGTH = 137
    VULKAN_CIG_SUPPORTED = 138
    GPU_PCI_DEVICE_ID = 139
    GPU_PCI_SUBSYSTEM_ID = 140
    HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 141
    HOST_NUMA_MEMORY_POOLS_SUPPORTED = 142
    HOST_NUMA_MULTINODE_IPC_SUPPORTED = 143
    HOST_MEMORY_POOLS_SUPPORTED = 144
    HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 145
    HOST_ALLOC_DMA_BUF_SUPPORTED = 146
    ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED = 147


class function_attribute(_Names):
    """What Function.get_attribute reads (and set_attribute sets, for the few a program may)."""

    MAX_THREADS_PER_BLOCK = 0
    SHARED_SIZE_BYTES = 1
    CONST_SIZE_BYTES = 2
    LOCAL_SIZE_BYTES = 3
    NUM_REGS = 4
    PTX_VERSION = 5
    BINARY_VERSION = 6
    CACHE_MODE_CA = 7
    MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    PREFERRED_SHARED_MEMORY_CARVEOUT = 9
    CLUSTER_SIZE_MUST_BE_SET = 10
    REQUIRED_CLUSTER_WIDTH = 11
    REQUIRED_CLUSTER_HEIGHT = 12
    REQUIRED_CLUSTER_DEPTH = 13
    NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
    CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15
    MAX = 16  # how many there are, no attribute


class func_cache(_Names):
    """A kernel's or context's preferred split of L1 and shared memory."""

    PREFER_NONE = 0
    PREFER_SHARED = 1
    PREFER_L1 = 2
    PREFER_EQUAL = 3


class shared_config(_Names):
    """The shared memory bank size."""

    DEFAULT_BANK_SIZE = 0
    FOUR_BYTE_BANK_SIZE = 1
    EIGHT_BYTE_BANK_SIZE = 2


class limit(_Names):
    """What Context.get_limit and set_limit read and set."""

    STACK_SIZE = 0
    PRINTF_FIFO_SIZE = 1
    MALLOC_HEAP_SIZE = 2
    DEV_RUNTIME_SYNC_DEPTH = 3
    DEV_RUNTIME_PENDING_LAUNCH_COUNT = 4
    MAX_L2_FETCH_GRANULARITY = 5
    PERSISTING_L2_CACHE_SIZE = 6
    SHMEM_SIZE = 7
    CIG_ENABLED = 8
    CIG_SHMEM_FALLBACK_ENABLED = 9


class compute_mode(_Names):
    """Device.get_attribute(device_attribute.COMPUTE_MODE)."""

    DEFAULT = 0
    PROHIBITED = 2
    EXCLUSIVE_PROCESS = 3


class host_alloc_flags(_Names):
    """mem_flags of pagelocked_empty and the like; kiln's page-locked memory is always
    portable."""

    PORTABLE = 1
    DEVICEMAP = 2
    WRITECOMBINED = 4


class mem_host_register_flags(_Names):
    """flags of register_host_memory (always portable in kiln)."""

    PORTABLE = 1
    DEVICEMAP = 2


class jit_input_type(_Names):
    """What an input of kiln.compiler.DynamicModule's link is (add_data, add_file)."""

    CUBIN = 0
    PTX = 1
    FATBINARY = 2
    OBJECT = 3
    LIBRARY = 4


class mem_attach_flags(_Names):
    """Who may use managed memory (managed_empty's mem_flags, ManagedAllocation.attach)."""

    GLOBAL = 1
    HOST = 2
    SINGLE = 4


class memory_type(_Names):
    """What kind of memory a pointer or a Memcpy2D/Memcpy3D side is."""

    HOST = 1
    DEVICE = 2
    ARRAY = 3
    UNIFIED = 4


class pointer_attribute(_Names):
    """Attributes of a pointer, as cuPointerGetAttribute numbers them (PyCUDA names four)."""

    CONTEXT = 1
    MEMORY_TYPE = 2
    DEVICE_POINTER = 3
    HOST_POINTER = 4


class jit_option(_Names):
    """Options of the driver's loader, module_from_buffer's options=[(jit_option, value)].
    The log buffers are kiln's own (module_from_buffer's message_handler reads them)."""

    MAX_REGISTERS = 0
    THREADS_PER_BLOCK = 1
    WALL_TIME = 2
    INFO_LOG_BUFFER = 3
    INFO_LOG_BUFFER_SIZE_BYTES = 4
    ERROR_LOG_BUFFER = 5
    ERROR_LOG_BUFFER_SIZE_BYTES = 6
    OPTIMIZATION_LEVEL = 7
    TARGET_FROM_CUCONTEXT = 8
    TARGET = 9
    FALLBACK_STRATEGY = 10
    GENERATE_DEBUG_INFO = 11
    LOG_VERBOSE = 12
    GENERATE_LINE_INFO = 13
    CACHE_MODE = 14
    FAST_COMPILE = 16
    POSITION_INDEPENDENT_CODE = 30
    MIN_CTA_PER_SM = 31
    MAX_THREADS_PER_BLOCK = 32
    OVERRIDE_DIRECTIVE_VALUES = 33


class jit_target(_Names):
    """jit_option.TARGET's values: the compute capability the loader compiles PTX for."""

    COMPUTE_30 = 30
    COMPUTE_32 = 32
    COMPUTE_35 = 35
    COMPUTE_37 = 37
    COMPUTE_50 = 50
    COMPUTE_52 = 52
    COMPUTE_53 = 53
    COMPUTE_60 = 60
    COMPUTE_61 = 61
    COMPUTE_62 = 62
    COMPUTE_70 = 70
    COMPUTE_72 = 72
    COMPUTE_75 = 75
    COMPUTE_80 = 80
    COMPUTE_86 = 86
    COMPUTE_87 = 87
    COMPUTE_89 = 89
    COMPUTE_90 = 90
    COMPUTE_100 = 100
    COMPUTE_103 = 103
    COMPUTE_110 = 110
    COMPUTE_120 = 120
    COMPUTE_121 = 121
    COMPUTE_90A = 0x10000 + 90  # CU_COMPUTE_ACCELERATED_TARGET_BASE + 90


class jit_fallback(_Names):
    """jit_option.FALLBACK_STRATEGY's values."""

    PREFER_PTX = 0
    PREFER_BINARY = 1


class profiler_output_mode(_Names):
    """initialize_profiler's output_mode (CUDA 12 removed the call itself)."""

    KEY_VALUE_PAIR = 0
    CSV = 1


class graphics_register_flags(_Names):
    """Flags of registering OpenGL resources (kiln has no OpenGL interop; the names are
    PyCUDA's)."""

    NONE = 0
    READ_ONLY = 1
    WRITE_DISCARD = 2
    SURFACE_LDST = 4
    TEXTURE_GATHER = 8


class address_mode(_Names):
    """Texture address modes; CUDA 12 removed the texture references PyCUDA set them on."""

    WRAP = 0
    CLAMP = 1
    MIRROR = 2
    BORDER = 3


class filter_mode(_Names):
    """Texture filter modes (see address_mode)."""

    POINT = 0
    LINEAR = 1


# Texture reference flags and the texture unit, cuda.h's #defines under PyCUDA's names.
TRSA_OVERRIDE_FORMAT = 0x01
TRSF_READ_AS_INTEGER = 0x01
TRSF_NORMALIZED_COORDINATES = 0x02
TR_DEFAULT = -1


class ipc_mem_flags(_Names):
    """flags of IPCMemoryHandle: how memory another process shared is mapped."""

    LAZY_ENABLE_PEER_ACCESS = 1


class array_format(_Names):
    """The format of a CUDA array's elements (ArrayDescriptor.format): each of 1, 2 or 4
    channels is one of these."""

    UNSIGNED_INT8 = 0x01
    UNSIGNED_INT16 = 0x02
    UNSIGNED_INT32 = 0x03
    SIGNED_INT8 = 0x08
    SIGNED_INT16 = 0x09
    SIGNED_INT32 = 0x0A
    HALF = 0x10
    FLOAT = 0x20


# PyCUDA's names, one of which ("2DARRAY") is no Python identifier: getattr(array3d_flags,
# "2DARRAY") or array3d_flags["2DARRAY"] reads it. LAYERED comes first, so it is the name the
# value prints as; the others are its aliases.
array3d_flags = _Names("array3d_flags", [
    ("LAYERED", 0x01),
    ("ARRAY3D_LAYERED", 0x01),
    ("2DARRAY", 0x01),
    ("ARRAY3D_2DARRAY", 0x01),
    ("SURFACE_LDST", 0x02),
    ("CUBEMAP", 0x04),
    ("TEXTURE_GATHER", 0x08),
], module=__name__)
array3d_flags.__doc__ = """Flags of a 3D array (ArrayDescriptor3D.flags): LAYERED (its depth counts
layers; 2DARRAY is the old name), SURFACE_LDST (surface loads and stores), CUBEMAP (six square
faces), TEXTURE_GATHER."""


class array_cubemap_face(_Names):
    """The faces of a CUBEMAP array, in the order of its depth."""

    POSITIVE_X = 0
    NEGATIVE_X = 1
    POSITIVE_Y = 2
    NEGATIVE_Y = 3
    POSITIVE_Z = 4
    NEGATIVE_Z = 5
