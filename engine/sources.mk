# The engine's sources: the one list the Makefile and setup.py both read.
KILN_ENGINE_SOURCES = \
	engine/src/status.c \
	engine/src/dup.c \
	engine/src/file.c \
	engine/src/driver.c \
	engine/src/nvrtc.c \
	engine/src/hash.c \
	engine/src/wire.c \
	engine/src/demangle.c \
	engine/src/ptx.c \
	engine/src/headers.c \
	engine/src/entry.c \
	engine/src/options.c \
	engine/src/stdheaders.c \
	engine/src/dialect.c \
	engine/src/link.c \
	engine/src/pch.c \
	engine/src/remote.c \
	engine/src/compile.c \
	engine/src/cache.c \
	engine/src/device.c \
	engine/src/context.c \
	engine/src/memory.c \
	engine/src/cuarray.c \
	engine/src/copy3d.c \
	engine/src/ipc.c \
	engine/src/peer.c \
	engine/src/stage.c \
	engine/src/module.c \
	engine/src/globals.c \
	engine/src/function.c \
	engine/src/image.c \
	engine/src/portable.c \
	engine/src/stream.c \
	engine/src/graph.c \
	engine/src/launch.c

# The compile helper's main (remote.c says why it is a program of its own).
KILN_HELPER_SOURCE = engine/helper/kiln-nvrtc.c
