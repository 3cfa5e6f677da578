"""emu_runtime.py - the Python half of the executing stand-in HIP runtime (tests/hip/fake_hip.c built
with FAKE_HIP_EMULATOR, loaded by the library through R35A_HIP_LIBRARY).

The C half embeds this interpreter and keeps HIP's bookkeeping (allocations, streams, the queue of
memsets and launches); this module only holds the gfx11emu objects: the code objects the library
handed to hipModuleLoadData, the allocations registered for check_bounds, and the launches.

Every launch runs with check_bounds on (any access outside a registered allocation, the kernarg
segment or the code object raises EmuCheckError before it happens) and gfx11emu's check_wmma on.
"""
import gfx11emu as G

_code_objects = {}   # handle -> gfx11emu.CodeObject
_next_handle = 1


def load(image: bytes) -> int:
    """Loads an AMDGPU code object (the bytes hipModuleLoadData got); returns a handle."""
    global _next_handle
    co = G.load(image)
    handle = _next_handle
    _next_handle += 1
    _code_objects[handle] = co
    return handle


def unload(handle: int) -> None:
    _code_objects.pop(handle, None)


def kernel_info(handle: int, name: str):
    """(argument bytes, max workgroup threads) of kernel `name`, from the code object's metadata, or
    None when the metadata has no such kernel. The library's kernels take one by-value struct."""
    k = _code_objects[handle].kernels.get(name)
    if k is None:
        return None
    if len(k.args) != 1:
        raise ValueError(f"{name} takes {len(k.args)} explicit arguments; the library passes one struct")
    return k.args[0][".size"], k.meta.get(".max_flat_workgroup_size", 1024)


def register(ptr: int, nbytes: int, label: str) -> int:
    """Makes [ptr, ptr + nbytes) valid for check_bounds; returns the key unregister() takes."""
    return G.register_memory(ptr, nbytes, label)


def unregister(key: int) -> None:
    G.unregister_memory(key)


def launch(handle: int, name: str, grid, block, args: bytes) -> None:
    """Runs kernel `name` over grid x block with its argument struct `args`; raises on any check."""
    k = _code_objects[handle].kernels[name]
    G.launch(k, grid=tuple(grid), block=tuple(block), args=[bytes(args)], check_bounds=True)
